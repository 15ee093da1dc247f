# Sourced by the Slurm tests: a one-node Slurm cluster on this machine, all of its state in one
# directory (munged, slurmctld and slurmd as root, on two free TCP ports of 127.0.0.1, no
# accounting database, no cgroups).
#   slurm_cluster_start DIR   start it; exports SLURM_CONF; returns 1 (with the reason on stderr)
#                             when a daemon does not come up or the node is not idle within 60 s
#   slurm_cluster_stop DIR    stop the three daemons (and whatever jobs they still run)
# Needs Debian's slurm-wlm and munge (scripts/setup.sh); slurm_cluster_missing prints what is
# missing of them (nothing when all is there).

slurm_cluster_missing() {
  local c
  for c in munged slurmctld slurmd slurmstepd sbatch squeue scancel srun; do
    command -v "$c" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$c" >/dev/null 2>&1 || echo "$c"
  done
}

slurm_cluster_start() {
  local dir=$1 ports host cpus i
  PATH=$PATH:/usr/sbin
  mkdir -p "$dir/munge-key" "$dir/munge-socket" "$dir/state" "$dir/spool" "$dir/log"
  # munged checks that its key is private and that its socket's directory is reachable by everyone.
  chmod 755 "$dir" "$dir/munge-socket"
  chmod 700 "$dir/munge-key"
  dd if=/dev/urandom of="$dir/munge-key/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge-key/munge.key"
  munged --socket="$dir/munge-socket/socket" --key-file="$dir/munge-key/munge.key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge-key/seed" ||
    { echo "slurm_cluster_start: munged did not start: $(tail -n 2 "$dir/log/munged.log" 2>/dev/null)" >&2; return 1; }
  # Two ports the kernel says are free now (another cluster on this machine has its own).
  ports=$(/usr/bin/python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
  host=$(hostname -s)
  cpus=$(nproc)  # at least 2, for the tests' 2-rank jobs (config_overrides: Slurm believes it)
  [ "$cpus" -ge 2 ] || cpus=2
  cat >"$dir/slurm.conf" <<CONF
ClusterName=realpos-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports% *}
SlurmdPort=${ports#* }
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge-socket/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=3600
KillWait=10
SlurmdParameters=config_overrides
NodeName=rpnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=rpnode Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" ||
    { echo "slurm_cluster_start: slurmctld did not start: $(tail -n 2 "$dir/log/slurmctld.log")" >&2; return 1; }
  slurmd -f "$SLURM_CONF" -N rpnode ||
    { echo "slurm_cluster_start: slurmd did not start: $(tail -n 2 "$dir/log/slurmd.log")" >&2; return 1; }
  for i in $(seq 1 120); do
    [ "$(sinfo -h -n rpnode -o %T 2>/dev/null)" = idle ] && return 0
    sleep 0.5
  done
  echo "slurm_cluster_start: node rpnode not idle after 60 s: $(sinfo -h -o '%T %E' 2>&1);" \
    "$(tail -n 3 "$dir/log/slurmctld.log" "$dir/log/slurmd.log")" >&2
  return 1
}

slurm_cluster_stop() {
  local dir=$1 name pid i
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then  # end the jobs first (within KillWait)
    SLURM_CONF=$dir/slurm.conf scancel --quiet --user=root 2>/dev/null
    for i in $(seq 1 60); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
  for name in slurmd slurmctld munged; do
    pid=$(cat "$dir/$name.pid" 2>/dev/null) || continue
    kill "$pid" 2>/dev/null || continue
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  return 0
}
