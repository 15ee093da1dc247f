#!/usr/bin/env bash
# Install what realpos needs and is missing (`make deps` runs this; idempotent and quiet when all
# is present). Each need is checked by what it provides (pkg-config names, commands, Python
# modules), not by package names, so a non-Debian machine that has them passes; on Debian the
# missing ones are installed with apt-get (as root, or with sudo).
#   --quiet   print nothing when everything is present
#   --fuzz    also clang with libFuzzer (for `make fuzz`)
set -euo pipefail
quiet=0 fuzz=0
for arg in "$@"; do
  case "$arg" in
    --quiet) quiet=1 ;;
    --fuzz) fuzz=1 ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=() # Debian packages to install
what=()    # what is missing, for the message on a machine without apt-get
need() { # need DESCRIPTION CHECK-COMMAND DEBIAN-PACKAGE...
  local description=$1 check=$2; shift 2
  if ! bash -c "$check" >/dev/null 2>&1; then missing+=("$@"); what+=("$description"); fi
}
have_pc() { echo "command -v pkg-config && pkg-config --exists $*"; }

need "a C compiler and make" "command -v ${CC:-cc} && command -v make" build-essential
need "pkg-config" "command -v pkg-config" pkg-config
need "OpenBLAS (OpenMP build)" "$(have_pc openblas)" libopenblas-openmp-dev
need "HDF5" "$(have_pc hdf5)" libhdf5-dev
need "inih" "$(have_pc inih)" libinih-dev
need "cJSON" "$(have_pc libcjson)" libcjson-dev
need "utf8proc" "$(have_pc libutf8proc)" libutf8proc-dev
need "zlib (gzip corpora)" "$(have_pc zlib)" zlib1g-dev
need "libzstd (zstd corpora)" "$(have_pc libzstd)" libzstd-dev
need "oneDNN (bf16 matrix products)" "echo '#include <oneapi/dnnl/dnnl.h>' | ${CC:-cc} -E -x c - -o /dev/null" libdnnl-dev
need "OpenMPI" "$(have_pc ompi-c) && command -v mpirun" libopenmpi-dev openmpi-bin
# The PyTorch reference, test scripts and plots use Debian's python3 with these modules.
need "python3 with torch, numpy, h5py, matplotlib" \
  "/usr/bin/python3 -c 'import torch, numpy, h5py, matplotlib'" \
  python3-torch python3-numpy python3-h5py python3-matplotlib
# Slurm and munge for tests/train/cli/test_slurm.sh (a one-node cluster the test starts itself).
need "Slurm (sbatch, slurmctld, slurmd) and munge" \
  "PATH=\$PATH:/usr/sbin; command -v sbatch && command -v slurmctld && command -v slurmd && command -v munged" \
  slurm-wlm munge
# tcmalloc for the PyTorch side of `make bench` (its best CPU setting).
need "tcmalloc" "ls /usr/lib/*/libtcmalloc_minimal.so.4" libtcmalloc-minimal4
# npm fetches the vocabulary and part of the default corpus; keep a node/npm the machine has.
need "npm" "command -v npm" nodejs npm
if [ $fuzz -eq 1 ]; then
  need "clang with libFuzzer" \
    "echo 'int LLVMFuzzerTestOneInput(const char*d,long n){(void)d;(void)n;return 0;}' |
       clang -x c -fsanitize=fuzzer - -o /dev/null" clang libclang-rt-14-dev
fi

if [ ${#missing[@]} -eq 0 ]; then
  [ $quiet -eq 1 ] || echo "setup: all dependencies present"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing: $(IFS=';'; echo "${what[*]}")." >&2
  echo "setup: this is not a Debian machine; install them with your package manager." >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
