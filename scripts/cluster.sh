#!/usr/bin/env bash
# A real single-node cluster for people, the node tier's harness: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, its own containerd and kubelet on loopback, with
# Manifold installed as the node's CNI by `manifold install` (per call, or with the daemon).
#
#   scripts/cluster.sh up [per-call|daemon]   start it in the background (≈ 6 s)
#   scripts/cluster.sh env                    print the exports (eval "$(scripts/cluster.sh env)")
#   scripts/cluster.sh down                   stop it and remove everything it made
#
# Needs root, MANIFOLD_KUBE_APISERVER (kubelet, kube-controller-manager, kube-scheduler beside
# it or in MANIFOLD_KUBE_BIN_DIR), etcd, containerd, runc, gcc (scripts/setup.sh installs them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state="${MANIFOLD_CLUSTER_STATE:-${TMPDIR:-/tmp}/manifold-cluster}"

case "${1:-}" in
up)
  if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
    echo "cluster.sh: already up (pid $(cat "$state/pid")); scripts/cluster.sh down first" >&2
    exit 1
  fi
  mkdir -p "$state"
  rm -f "$state/env"
  setsid deno run -A "$here/scripts/cluster.ts" "$state" "${2:-per-call}" >"$state/cluster.log" 2>&1 &
  echo $! >"$state/pid"
  for _ in $(seq 1 120); do
    [ -f "$state/env" ] && { cat "$state/env"; exit 0; }
    kill -0 "$(cat "$state/pid")" 2>/dev/null || { cat "$state/cluster.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "cluster.sh: not up after 60 s; see $state/cluster.log" >&2
  exit 1
  ;;
env)
  cat "$state/env" 2>/dev/null || { echo "cluster.sh: not up" >&2; exit 1; }
  ;;
down)
  if [ -f "$state/pid" ]; then
    pid="$(cat "$state/pid")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    rm -f "$state/pid"
  fi
  ;;
*)
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
