#!/usr/bin/env bash
# The wings depend one way (tests/core/check_includes.py): no file includes a header of a higher or
# peer wing, and no module includes itself round a circle. Prints the include graph, then checks
# that the checker catches planted violations.
source "$(dirname "$0")/../lib.sh"

$PY tests/core/check_includes.py --graph

# A tree with one upward include (core -> layers), one peer include (train/data -> train/model),
# a file outside every wing and mpi.h included outside optim/dist.c (by core and by another optim
# file): each must be reported (the upward include also closes a circle core/base <-> layers/op),
# and optim/dist.c's own mpi.h must not.
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
   grep -qF 'train/data/d.c:1: #include "train/model/m.h": train/data (rank 4) includes a peer wing' <<<"$out" &&
   grep -qF 'train/extra/x.c: its folder is no wing' <<<"$out" &&
   grep -qF 'core/error.c:2: #include <mpi.h>: only optim/dist.c may talk to MPI' <<<"$out" &&
   grep -qF 'optim/sum.c:2: #  include "mpi.h": only optim/dist.c may talk to MPI' <<<"$out" &&
   grep -qF 'include circle core/base -> layers/op -> core/base' <<<"$out" &&
   [ "$(grep -c '^FAIL' <<<"$out")" -eq 6 ] &&
   ! grep -q '^FAIL includes: layers/op.h:1' <<<"$out" && ! grep -q '^FAIL includes: train/model' <<<"$out" &&
   ! grep -q '^FAIL includes: optim/dist' <<<"$out"; then
  pass "include check reports an upward include, a peer include, a file outside the wings and mpi.h outside optim/dist.c, and only those"
else
  fail "include check reports an upward include, a peer include, a file outside the wings and mpi.h outside optim/dist.c, and only those" "status $rc: $out"
fi

# Include circles between modules (a module is a path without .c/.h): a .c including the other's
# header both ways, three modules round a circle through headers alone, and one that is no circle
# (a module including its own header, a header included from two modules). A wing of core that
# includes a header outside core (core/config -> layers: allowed by rank, not by core's rule). In
# train/data a function exported without being in its file's header (a.c's a_helper), beside a
# static helper and a function its header declares (b.c: not reported).
mkdir -p "$tmp/circ/core/config" "$tmp/circ/layers" "$tmp/circ/train/data" "$tmp/circ/train/model"
printf '#include "train/data/b.h"\nint a_helper(void) {\n    return 0;\n}\n' > "$tmp/circ/train/data/a.c"
: > "$tmp/circ/train/data/a.h"
printf '#include "train/data/a.h"\n#include "train/data/b.h"\nstatic int b_private(void) { return 1; }\nint b_api(int x,\n          int y) {\n    return x + y + b_private();\n}\n' > "$tmp/circ/train/data/b.c"
printf 'int b_api(int x, int y);\n' > "$tmp/circ/train/data/b.h"
printf '#include "core/y.h"\n' > "$tmp/circ/core/x.h"
: > "$tmp/circ/core/y.h"
printf '#include "core/z.h"\n' > "$tmp/circ/core/y.c"
printf '#include "core/x.h"\n' > "$tmp/circ/core/z.h"
printf '#include "train/model/m.h"\n#include "core/y.h"\n' > "$tmp/circ/train/model/m.c"
printf '#include "core/y.h"\n' > "$tmp/circ/train/model/m.h"
printf '#include "layers/op.h"\n' > "$tmp/circ/core/config/c.c"
: > "$tmp/circ/layers/op.h"
out=$($PY tests/core/check_includes.py --root "$tmp/circ" --graph 2>&1); rc=$?
if [ $rc -ne 0 ] &&
   grep -qF 'include circle train/data/a -> train/data/b -> train/data/a: train/data/a.c:1: #include "train/data/b.h"; train/data/b.c:1: #include "train/data/a.h"' <<<"$out" &&
   grep -qF 'include circle core/x -> core/y -> core/z -> core/x: core/x.h:1: #include "core/y.h"; core/y.c:1: #include "core/z.h"; core/z.h:1: #include "core/x.h"' <<<"$out" &&
   grep -qF 'core/config/c.c:1: #include "layers/op.h": core/config is a wing of core, which knows no model' <<<"$out" &&
   grep -qF 'train/data/a.c:2: a_helper is defined without static but not declared in train/data/a.h' <<<"$out" &&
   grep -qF '2 include circles' <<<"$out" && [ "$(grep -c '^FAIL' <<<"$out")" -eq 4 ] &&
   ! grep -q '^FAIL.*train/model' <<<"$out"; then
  pass "include check reports a circle of two modules through their .c files, one of three through headers, a wing of core including a layer, a function exported outside its header, and only those"
else
  fail "include check reports a circle of two modules through their .c files, one of three through headers, a wing of core including a layer, a function exported outside its header, and only those" "status $rc: $out"
fi
