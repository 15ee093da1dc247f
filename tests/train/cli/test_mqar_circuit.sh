#!/usr/bin/env bash
# scripts/dev/mqar_circuit.py: on attention maps built by hand (layer 0: a previous-token head and
# a next-token head; last layer: a head on the value after each query's key), it reports 1 where
# the circuit is and 0 elsewhere; it reads what `realpos attention` writes for a tagging model
# trained from scratch on `realpos synth mqar`; a word that is not one token, or maps of other
# sentences, are errors naming what differs.
source "$(dirname "$0")/../../lib.sh"
root=$PWD
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
circuit() { "$PY" "$root/scripts/dev/mqar_circuit.py" "$@"; }
cd "$tmp"
echo "k1 v7 k2 v5 k3 v9 k2 k3 k1" >lines.txt
"$PY" - <<'PY'
import h5py, numpy as np
L = 11  # [CLS] 9 words [SEP]
first = np.zeros((1, 2, L, L)); last = np.full((1, 2, L, L), 1.0 / L)
for i in range(L):
    first[0, 0, i, max(i - 1, 0)] = 1          # head 0: the previous token
    first[0, 1, i, min(i + 1, L - 1)] = 1      # head 1: the next token
value_after = {7: 4, 8: 6, 9: 2}  # query token -> the value after its key: k2 -> v5, k3 -> v9, k1 -> v7
last[0, 0] = 0
for q in range(L):
    last[0, 0, q, value_after.get(q, 0)] = 1
with h5py.File("maps.h5", "w") as f:
    f["layer_0/probs"], f["layer_1/probs"], f["lengths"] = first, last, np.array([L])
with h5py.File("split.h5", "w") as f:
    f["layer_0/probs"], f["layer_1/probs"], f["lengths"] = first, last, np.array([L + 1])
PY
circuit lines.txt maps.h5 --labels hand >out.txt 2>&1
check "the previous-token head: left 1, right 0" grep -qx "hand | 0 | 1.00 | 0.00 | 1.00" out.txt
check "the next-token head: left 0, right 1; a uniform last-layer head matches 1/11" grep -qx "hand | 1 | 0.00 | 1.00 | 0.09" out.txt
expect_error "a sentence of more tokens than words + 2 is refused" "sentence 1 has 9 words but 12 tokens" \
  circuit lines.txt split.h5
echo "k1 v7 k2 v5" >bad.txt
expect_error "a line that is not n pairs and n queries is refused" "3n words" circuit bad.txt maps.h5
expect_error "a maps file that is not HDF5 is refused, naming it" "cannot open lines.txt as HDF5" circuit lines.txt lines.txt
expect_error "a missing lines file is refused, naming it" "cannot read nothing.txt" circuit nothing.txt maps.h5

# the maps realpos attention writes, of a tagging model trained for a few steps on synth mqar
"$RP" synth mqar --lengths 2-4 --count 64 --seed 1 --out train.txt >/dev/null 2>&1
"$RP" synth mqar --lengths 3-3 --count 2 --per-length --seed 2 --out test.txt >/dev/null 2>&1
cat >tag.ini <<INI
[model]
hidden_size = 16
num_layers = 2
num_heads = 2
intermediate_size = 32
relative_position = shaw
relative_k = 4
[train]
run_dir = $tmp/run
[task]
type = tagging
init_checkpoint = none
train_file = $tmp/train.txt
dev_file = $tmp/test.txt
max_seq_len = 20
batch_size = 8
max_steps = 4
INI
"$RP" finetune tag.ini >ft.log 2>&1 || fail "a few steps of tagging on synth mqar" "$(tail -3 ft.log)"
"$PY" -c "
ex, cur = [], []
for line in open('test.txt'):
    if line.strip(): cur.append(line.split()[0])
    elif cur: ex.append(' '.join(cur)); cur = []
if cur: ex.append(' '.join(cur))
open('real.txt', 'w').write('\n'.join(ex) + '\n')"
"$RP" attention run/model.h5 --input real.txt --out real.h5 >attn.log 2>&1 ||
  fail "realpos attention of the tagging model" "$(tail -3 attn.log)"
circuit real.txt real.h5 --labels real >real.out 2>&1
check "realpos attention's maps read: a row per head, fractions in [0, 1]" "$PY" -c "
rows = [l.split(' | ') for l in open('real.out').read().splitlines()[1:]]
assert len(rows) == 2 and all(0 <= float(x) <= 1 for r in rows for x in r[2:]), rows"
