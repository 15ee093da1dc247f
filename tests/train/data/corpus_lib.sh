# Sourced by the prepare tests (after tests/lib.sh, with $FIX the corpus fixtures and the working
# directory $tmp): configs with their own shard directories, and the check of a refusal.

# config NAME CORPUS... : a config NAME.ini with its own shard_dir NAME.shards
config() {
  local name=$1; shift
  printf '[data]\ncorpus = %s\nvocab = %s\nshard_dir = %s.shards\neval_fraction = 0.3\n' \
    "$*" "${VOCAB:-$FIX/vocab.txt}" "$name" >"$name.ini"
}

# expect_error NAME MESSAGE: `realpos prepare NAME.ini` exits non-zero with the single stderr line
# "realpos: error: MESSAGE" (a trailing '*' matches as a prefix) and writes no index.
expect_error() {
  local name=$1 message=$2 got
  "$RP" prepare "$name.ini" >out 2>err
  local rc=$?
  got=$(grep -v '^\[' err) # drop the timestamped progress line
  if [ "$rc" -eq 0 ]; then fail "$name" "exit 0"
  elif [ "$(echo "$got" | wc -l)" -ne 1 ]; then fail "$name" "expected one error line, got: $got"
  elif [[ "$message" == *'*' && "$got" != "realpos: error: ${message%'*'}"* ]] ||
       [[ "$message" != *'*' && "$got" != "realpos: error: $message" ]]; then
    fail "$name" "expected 'realpos: error: $message', got '$got'"
  elif [ -e "$name.shards/index.json" ]; then fail "$name" "wrote $name.shards/index.json"
  else pass "$name: $message"; fi
}

# totals DIR: the train and eval document and token totals of a set's index
totals() { /usr/bin/python3 -c 'import json,sys; i=json.load(open(sys.argv[1]+"/index.json")); print(*(i[s][k] for s in ("train","eval") for k in ("documents","tokens")))' "$1"; }
