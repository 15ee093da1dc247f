#!/usr/bin/env bash
# The wings depend one way (tests/core/check_includes.py): no file includes a header of a higher or
# peer wing. Prints the include graph, then checks that the checker catches a planted violation.
source "$(dirname "$0")/../lib.sh"

$PY tests/core/check_includes.py --graph

# A tree with one upward include (core -> layers), one peer include (train/data -> train/model),
# a file outside every wing and mpi.h included outside optim/dist.c (by core and by another optim
# file): each must be reported, and optim/dist.c's own mpi.h must not.
mkdir -p "$tmp/tree/core" "$tmp/tree/layers" "$tmp/tree/optim" "$tmp/tree/train/data" \
  "$tmp/tree/train/model" "$tmp/tree/train/extra"
printf '#include "layers/op.h"\n' > "$tmp/tree/core/base.h"
printf '#include "core/base.h"\n#include <mpi.h>\n' > "$tmp/tree/core/error.c"
printf '#include <mpi.h>\n#include "core/base.h"\n' > "$tmp/tree/optim/dist.c"
printf '#include "optim/dist.c"\n  #  include "mpi.h"\n' > "$tmp/tree/optim/sum.c"
printf '#include "core/base.h"\n' > "$tmp/tree/layers/op.h"
printf '#include "train/model/m.h"\n' > "$tmp/tree/train/data/d.c"
printf '#include "core/base.h"\n' > "$tmp/tree/train/model/m.h"
printf '#include "core/base.h"\n' > "$tmp/tree/train/extra/x.c"
out=$($PY tests/core/check_includes.py --root "$tmp/tree" 2>&1); rc=$?
if [ $rc -ne 0 ] &&
   grep -qF 'core/base.h:1: #include "layers/op.h": core (rank 0) includes a higher wing layers' <<<"$out" &&
   grep -qF 'train/data/d.c:1: #include "train/model/m.h": train/data (rank 3) includes a peer wing' <<<"$out" &&
   grep -qF 'train/extra/x.c: its folder is no wing' <<<"$out" &&
   grep -qF 'core/error.c:2: #include <mpi.h>: only optim/dist.c may talk to MPI' <<<"$out" &&
   grep -qF 'optim/sum.c:2: #  include "mpi.h": only optim/dist.c may talk to MPI' <<<"$out" &&
   [ "$(grep -c '^FAIL' <<<"$out")" -eq 5 ] &&
   ! grep -qF 'layers/op.h:1' <<<"$out" && ! grep -q '^FAIL includes: train/model' <<<"$out" &&
   ! grep -q '^FAIL includes: optim/dist' <<<"$out"; then
  pass "include check reports an upward include, a peer include, a file outside the wings and mpi.h outside optim/dist.c, and only those"
else
  fail "include check reports an upward include, a peer include, a file outside the wings and mpi.h outside optim/dist.c, and only those" "status $rc: $out"
fi
