#!/usr/bin/env bash
# realpos fill-mask over several lines of different lengths (stdin): one activation layout for the
# longest line, each line a batch [1, its length] in a prefix of it. The output equals running each
# line alone (--text), byte for byte, whichever order the long and short lines come in.
source "$(dirname "$0")/../../lib.sh"
FX=tests/fixtures/finetune
"$RP" init $FX/tiny.ini --out "$tmp/mlm.h5" 2>/dev/null || fail "init checkpoint"
"$RP" init $FX/tiny.ini --set model.absolute_position=no --set model.relative_position=method4 \
  --set model.relative_k=4 --set model.residual_attention=yes --out "$tmp/rel.h5" 2>/dev/null || fail "init rel checkpoint"
printf 'the film is [MASK] and good\n\n[MASK] bad\na long [MASK] film is the best film and [MASK] good\nit is [MASK]\n' \
  >"$tmp/lines.txt"
for ckpt in mlm rel; do
  "$RP" fill-mask "$tmp/$ckpt.h5" --top-k 3 <"$tmp/lines.txt" >"$tmp/$ckpt-all.txt" 2>"$tmp/$ckpt.err" ||
    fail "$ckpt: fill-mask over stdin exits 0" "$(head -c 300 "$tmp/$ckpt.err")"
  : >"$tmp/$ckpt-one.txt"
  while read -r line; do
    [ -n "$line" ] && "$RP" fill-mask "$tmp/$ckpt.h5" --top-k 3 --text "$line" >>"$tmp/$ckpt-one.txt" 2>/dev/null
  done <"$tmp/lines.txt"
  if [ -s "$tmp/$ckpt-all.txt" ] && [ "$(grep -c 'of [12]$' "$tmp/$ckpt-all.txt")" -eq 5 ] &&
    cmp -s "$tmp/$ckpt-all.txt" "$tmp/$ckpt-one.txt"; then
    pass "$ckpt: 4 lines of 3-13 tokens in one layout = each line alone (5 masks, byte for byte)"
  else
    fail "$ckpt: 4 lines of 3-13 tokens in one layout = each line alone" "$(diff "$tmp/$ckpt-all.txt" "$tmp/$ckpt-one.txt" | head -5)"
  fi
done
# Each line runs alone, [1, its length]: there is no padding to lay out, so the checkpoint's
# data.padding and task.padding (none, longest, max_length) must not change a byte of the output.
for pad in none longest max_length; do
  "$RP" init $FX/tiny.ini --set data.padding=$pad --set task.padding=$pad --out "$tmp/pad-$pad.h5" 2>/dev/null ||
    fail "init checkpoint with padding $pad"
  "$RP" fill-mask "$tmp/pad-$pad.h5" --top-k 3 <"$tmp/lines.txt" >"$tmp/pad-$pad.txt" 2>/dev/null
  if [ -s "$tmp/pad-$pad.txt" ] && cmp -s "$tmp/pad-$pad.txt" "$tmp/mlm-all.txt"; then
    pass "fill-mask with data.padding = task.padding = $pad in the checkpoint: the same output, byte for byte"
  else
    fail "fill-mask depends on the checkpoint's padding ($pad)" "$(diff "$tmp/pad-$pad.txt" "$tmp/mlm-all.txt" | head -5)"
  fi
done
