#!/usr/bin/env bash
# Idempotent setup for a fresh Debian machine: Deno (pinned, from the npm registry),
# the CNI reference plugins (real delegates), iproute2, libmnl0, openssl and libssl3, etcd (for the
# tests against a real kube-apiserver), promtool (the alerting rules' tests), and the project's npm dependencies (cached from
# deno.lock).
set -euo pipefail

DENO_VERSION="${DENO_VERSION:-2.9.6}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'setup: %s\n' "$*" >&2; }

need_apt=()
[ -x /usr/lib/cni/bridge ] || need_apt+=(containernetworking-plugins)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
ldconfig -p 2>/dev/null | grep -q 'libmnl.so.0' || need_apt+=(libmnl0)
{ command -v nft && ldconfig -p | grep -q 'libnftables.so.1'; } >/dev/null 2>&1 || need_apt+=(nftables) # nft + libnftables1 (MultiNetworkPolicy)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# The per-call plugin's TLS to the API (lib/k8s/http1/native_tls.ts) opens libssl.so.3.
ldconfig -p 2>/dev/null | grep -q 'libssl.so.3' || need_apt+=(libssl3)
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
# The node tier (tests/node/): its own containerd (with ctr) and runc, images built with gcc -static.
command -v containerd >/dev/null 2>&1 || need_apt+=(containerd)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
# tests/image/ and tests/node/daemonset*_test.ts build the image offline (scripts/image.sh: a
# Debian root file system by mmdebstrap).
command -v mmdebstrap >/dev/null 2>&1 || need_apt+=(mmdebstrap)
# …and pushes it to a local registry as docs/install.md says (skopeo, docker-registry on loopback).
command -v skopeo >/dev/null 2>&1 || need_apt+=(skopeo)
command -v docker-registry >/dev/null 2>&1 || need_apt+=(docker-registry)
# tests/deploy/delegate_paths_test.ts traces the delegates the daemon runs.
command -v strace >/dev/null 2>&1 || need_apt+=(strace)
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
# promtool (Debian's prometheus package): tests/deploy/monitoring_test.ts runs the alerts' unit
# tests and lints a live daemon's /metrics. No server is started (no init system runs here).
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if ! command -v deno >/dev/null 2>&1 || [ "$(deno --version 2>/dev/null | head -n1 | awk '{print $2}')" != "$DENO_VERSION" ]; then
  log "installing deno@${DENO_VERSION} from the npm registry"
  npm install -g --silent "deno@${DENO_VERSION}" >/dev/null
  hash -r
fi
deno_bin="$(command -v deno)"
# Make deno reachable on the short PATH that runtimes and sudo use.
if [ "$deno_bin" != /usr/local/bin/deno ] && [ ! -e /usr/local/bin/deno ]; then
  ln -sf "$(readlink -f "$deno_bin")" /usr/local/bin/deno
fi
log "deno $(deno --version | head -n1 | awk '{print $2}') at $(command -v deno)"

cd "$here"
if [ -f deno.json ]; then
  log "caching dependencies (frozen lockfile)"
  deno install --frozen=true --quiet 2>/dev/null || deno install --quiet
  # `deno bundle` (scripts/pack.ts) runs esbuild, which deno fetches from the npm registry on
  # first use: fetched here so that a later build needs no network.
  log "fetching deno bundle's esbuild"
  packprobe=$(mktemp -d)
  echo 'export const probe = 1;' >"$packprobe/probe.ts"
  deno bundle --quiet --no-config --output "$packprobe/out.js" "$packprobe/probe.ts" >/dev/null
  rm -rf "$packprobe"
fi
log "done"
