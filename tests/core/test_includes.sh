#!/usr/bin/env bash
# The wings depend one way (tests/core/check_includes.py): no file includes a header of a higher or
# peer wing. Prints the include graph, then checks that the checker catches a planted violation.
source "$(dirname "$0")/../lib.sh"

$PY tests/core/check_includes.py --graph

# A tree with one upward include (core -> layers), one peer include (train/data -> train/model)
# and a file outside every wing: each must be reported.
mkdir -p "$tmp/tree/core" "$tmp/tree/layers" "$tmp/tree/train/data" "$tmp/tree/train/model" "$tmp/tree/train/extra"
printf '#include "layers/op.h"\n' > "$tmp/tree/core/base.h"
printf '#include "core/base.h"\n' > "$tmp/tree/layers/op.h"
printf '#include "train/model/m.h"\n' > "$tmp/tree/train/data/d.c"
printf '#include "core/base.h"\n' > "$tmp/tree/train/model/m.h"
printf '#include "core/base.h"\n' > "$tmp/tree/train/extra/x.c"
out=$($PY tests/core/check_includes.py --root "$tmp/tree" 2>&1); rc=$?
if [ $rc -ne 0 ] &&
   grep -qF 'core/base.h:1: #include "layers/op.h": core (rank 0) includes a higher wing layers' <<<"$out" &&
   grep -qF 'train/data/d.c:1: #include "train/model/m.h": train/data (rank 3) includes a peer wing' <<<"$out" &&
   grep -qF 'train/extra/x.c: its folder is no wing' <<<"$out" &&
   ! grep -qF 'layers/op.h:1' <<<"$out" && ! grep -q '^FAIL includes: train/model' <<<"$out"; then
  pass "include check reports an upward include, a peer include and a file outside the wings, and only those"
else
  fail "include check reports an upward include, a peer include and a file outside the wings, and only those" "status $rc: $out"
fi
