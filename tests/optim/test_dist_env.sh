#!/usr/bin/env bash
# The launcher's process counts (optim/dist.c) are read strictly: a garbled OMPI_COMM_WORLD_SIZE,
# PMI_SIZE or SLURM_STEP_NUM_TASKS is refused naming the variable, not read as 0 (which started a
# run of one process without a word); empty counts as unset.
source "$(dirname "$0")/../lib.sh"
for bad in abc 2x " 2" 0 -1 99999999999; do
  expect_error "OMPI_COMM_WORLD_SIZE='$bad' is refused naming the variable" \
    "environment variable OMPI_COMM_WORLD_SIZE: expected a number of processes (a whole number >= 1), got '$bad'" \
    env OMPI_COMM_WORLD_SIZE="$bad" "$RP" config /dev/null
done
expect_error "PMI_SIZE=many is refused naming the variable" "environment variable PMI_SIZE: expected" \
  env PMI_SIZE=many "$RP" config /dev/null
expect_error "SLURM_STEP_NUM_TASKS=x (under PMIx) is refused naming the variable" \
  "environment variable SLURM_STEP_NUM_TASKS: expected" env PMIX_RANK=0 SLURM_STEP_NUM_TASKS=x "$RP" config /dev/null
if env OMPI_COMM_WORLD_SIZE= PMI_SIZE= SLURM_STEP_NUM_TASKS= "$RP" config /dev/null >/dev/null 2>"$tmp/err"; then
  pass "empty launcher variables count as unset"
else fail "empty launcher variables count as unset" "$(head -c 300 "$tmp/err")"; fi
if env OMPI_COMM_WORLD_SIZE=1 "$RP" config /dev/null >/dev/null 2>"$tmp/err"; then
  pass "OMPI_COMM_WORLD_SIZE=1 is one process"
else fail "OMPI_COMM_WORLD_SIZE=1 is one process" "$(head -c 300 "$tmp/err")"; fi
