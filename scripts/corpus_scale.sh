#!/usr/bin/env bash
# Measure `realpos prepare` and `realpos pretrain` at growing corpus sizes (docs/corpus.md):
# prepare wall time, MB/s, M tokens/s and peak RSS; pretrain peak RSS, time to the first step
# (the wall time of a 1-step run: start-up, opening the shard set, one step, a 1-batch evaluation,
# one checkpoint) and tokens/s of the last window of a 12-step run (steps 7-12). Plain text and .jsonl.zst of each size.
#
# Usage: scripts/corpus_scale.sh [COPIES...]    (default: 1 50; 1 copy = the 20 MB default corpus)
# The corpora are the default corpus (data/corpus, scripts/fetch_corpus.sh) written COPIES times,
# each copy's documents made distinct by a first sentence naming the copy and document; they and
# every shard set land in runs/corpus_scale (git-ignored; delete it afterwards: 4 GB of text makes
# about 8 GB of files). The table goes to runs/corpus_scale/table.md. Not a test: numbers only.
set -euo pipefail
cd "$(dirname "$0")/.."
RP=${RP:-$PWD/realpos}
out=runs/corpus_scale
mkdir -p "$out"
copies=("${@:-1 50}")
[ $# -gt 0 ] || copies=(1 50)
src=(data/corpus/kjv.txt data/corpus/web.txt data/corpus/sotu.txt data/corpus/moby_dick.txt)
for f in "${src[@]}"; do [ -s "$f" ] || { echo "corpus_scale: $f missing: run scripts/fetch_corpus.sh" >&2; exit 1; }; done
vocab=data/vocab/bert-base-uncased.txt

# make_corpus N: $out/cN.txt (text) and $out/cN.jsonl.zst (one JSON document per line)
make_corpus() {
  local n=$1
  [ -s "$out/c$n.txt" ] || for ((c = 0; c < n; c++)); do
    awk -v c="$c" 'BEGIN { d = 0; open = 0 }
      /^[ \t\r]*$/ { if (open) print ""; open = 0; next }
      { if (!open) { print "Copy " c " document " d "."; d++ } open = 1; print }
      END { if (open) print "" }' "${src[@]}"
  done >"$out/c$n.txt"
  [ -s "$out/c$n.jsonl.zst" ] || /usr/bin/python3 - "$out/c$n.txt" <<'PY' | zstd -q -T2 -3 -o "$out/c$n.jsonl.zst"
import json, sys
doc = []
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        line = line.rstrip("\n")
        if line.strip():
            doc.append(line)
        elif doc:
            sys.stdout.write(json.dumps({"text": "\n".join(doc)}) + "\n"); doc = []
if doc:
    sys.stdout.write(json.dumps({"text": "\n".join(doc)}) + "\n")
PY
}

ini() { # ini NAME CORPUS
  cat configs/pretrain.ini >"$out/$1.ini"
  printf '\n' >>"$out/$1.ini"
  sed -i -e "s|^corpus = .*|corpus = $2|" -e "s|^vocab = .*|vocab = $vocab|" \
    -e "s|^shard_dir = .*|shard_dir = $out/$1.shards|" -e "s|^run_dir = .*|run_dir = $out/$1.run|" "$out/$1.ini"
}

rss_mb() { awk '/Maximum resident/ { printf "%.0f", $NF / 1024 }' "$1"; }
wall_s() { awk '/Elapsed \(wall/ { n = split($NF, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%.1f", s }' "$1"; }

table=$out/table.md
echo "| corpus | format | text MB | tokens M | prepare s | MB/s | M tok/s | prepare RSS MB | shards | pretrain RSS MB | first step s | tok/s |" >"$table"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|" >>"$table"
for n in "${copies[@]}"; do
  make_corpus "$n"
  mb=$(du -m --apparent-size "$out/c$n.txt" | cut -f1)
  for fmt in txt jsonl.zst; do
    name=c$n-${fmt%%.*}
    ini "$name" "$out/c$n.$fmt"
    rm -rf "$out/$name.shards" "$out/$name.run"
    /usr/bin/time -v "$RP" prepare "$out/$name.ini" >"$out/$name.prepare.log" 2>"$out/$name.prepare.time"
    tokens=$(awk '/^(train|eval) / { t += $(NF-1) } END { printf "%.1f", t / 1e6 }' "$out/$name.prepare.log")
    pwall=$(wall_s "$out/$name.prepare.time")
    shards=$(grep -c '"file"' "$out/$name.shards/index.json")
    prss=- first=- toks=-
    if [ "$fmt" = txt ]; then # the .jsonl.zst set holds the same shards (same split, same tokens)
      /usr/bin/time -v "$RP" pretrain "$out/$name.ini" --set train.max_steps=1 \
        --set train.eval_batches=1 >"$out/$name.first.log" 2>"$out/$name.first.time"
      rm -rf "$out/$name.run"
      /usr/bin/time -v "$RP" pretrain "$out/$name.ini" --set train.max_steps=12 \
        --set train.log_interval=6 --set train.eval_batches=1 --set train.checkpoint_interval=1000 \
        >"$out/$name.train.log" 2>"$out/$name.train.time"
      toks=$(grep '"kind":"train"' "$out/$name.run/metrics.jsonl" | tail -n 1 |
        /usr/bin/python3 -c 'import json,sys; print("%.0f" % json.loads(sys.stdin.read())["tokens_per_s"])')
      prss=$(rss_mb "$out/$name.train.time") first=$(wall_s "$out/$name.first.time")
    fi
    printf '| %s x%d | %s | %d | %s | %s | %.1f | %.1f | %s | %s | %s | %s | %s |\n' "default" "$n" "$fmt" "$mb" "$tokens" \
      "$pwall" "$(echo "$mb / $pwall" | bc -l)" "$(echo "$tokens / $pwall" | bc -l)" "$(rss_mb "$out/$name.prepare.time")" \
      "$shards" "$prss" "$first" "$toks" >>"$table"
    tail -n 1 "$table"
  done
done
cat "$table"
