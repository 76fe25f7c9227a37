#!/bin/sh
# A two-node cluster on this machine: two mount namespaces, each with its
# own tmpfs on /dev/shm (as two hosts have), the ranks talking only through
# MPI over TCP on loopback. Rank r runs in node r / 2 with WEFT_NODE_ID set.
#
#   two_nodes.sh setup DIR        make the nodes (DIR/node0, DIR/node1)
#   two_nodes.sh run DIR N CMD... mpirun -n N CMD, each rank in its node
#   two_nodes.sh hostfile DIR N CMD...
#                                 as a real cluster is launched: mpirun with a
#                                 hostfile of two hosts (127.0.0.2, 127.0.0.3,
#                                 2 slots each), which Open MPI takes for
#                                 remote ones and reaches through this
#                                 script's ssh stand-in: its daemon (orted)
#                                 runs in the host's node; no WEFT_NODE_ID,
#                                 the node comes from the launcher
#   two_nodes.sh ssh DIR HOST CMD the ssh stand-in
#   two_nodes.sh teardown DIR
#
# Exit 3 (SKIP, with the reason) where namespaces cannot be made: not root,
# no unshare/nsenter, or mounts refused.
set -u
cmd=$1 dir=$2
shift 2
skip() { echo "SKIP: two_nodes: $*"; exit 3; }
case $cmd in
setup)
  [ "$(id -u)" = 0 ] || skip "needs root for mount namespaces"
  command -v unshare >/dev/null && command -v nsenter >/dev/null ||
    skip "no unshare/nsenter (util-linux)"
  mkdir -p "$dir" || exit 1
  # Namespace files must live on a private mount.
  mountpoint -q "$dir" || mount --bind "$dir" "$dir" || skip "cannot bind-mount $dir"
  mount --make-private "$dir" || skip "cannot make $dir private"
  for n in 0 1; do
    touch "$dir/node$n"
    unshare --mount="$dir/node$n" sh -c 'mount -t tmpfs tmpfs /dev/shm' ||
      skip "cannot make a mount namespace with its own /dev/shm"
  done
  ;;
run)
  n=$1
  shift
  exec mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp \
    --mca btl_tcp_if_include lo -n "$n" \
    sh -c 'node=$((OMPI_COMM_WORLD_RANK / 2)); export WEFT_NODE_ID=$node;
           exec nsenter --mount="$0/node$node" --wd="$PWD" "$@"' "$dir" "$@"
  ;;
hostfile)
  n=$1
  shift
  printf '127.0.0.2 slots=2\n127.0.0.3 slots=2\n' > "$dir/hosts"
  # Every rank has its own slot, so Open MPI would busy-poll: yield instead
  # (4 ranks on this machine's 2 cores). rtc ^hwloc: Open MPI 4.1's daemon
  # crashed (SIGSEGV in hwloc_shmem_topology_write) in about 1 start of 7
  # here, sharing the topology it maps at a fixed address; 0 of 20 without.
  exec mpirun --allow-run-as-root --hostfile "$dir/hosts" \
    --mca plm_rsh_agent "$0 ssh $dir" --mca mpi_yield_when_idle 1 \
    --mca rtc ^hwloc \
    --mca btl self,tcp --mca btl_tcp_if_include lo -n "$n" "$@"
  ;;
ssh)
  host=$1
  shift
  case $host in
  127.0.0.2) node=0 ;;
  127.0.0.3) node=1 ;;
  *) echo "two_nodes.sh: no simulated host $host" >&2; exit 1 ;;
  esac
  exec nsenter --mount="$dir/node$node" --wd="$PWD" sh -c "$*"
  ;;
teardown)
  for n in 0 1; do umount "$dir/node$n" 2>/dev/null; done
  umount "$dir" 2>/dev/null
  rm -rf "$dir"
  ;;
esac
