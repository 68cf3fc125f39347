#!/usr/bin/env bash
# Writes an OCI image archive of Manifold without a container engine or a registry.
#
#   scripts/image.sh [-t TAG] [-o OUT.tar]
#     -t  image reference (default ghcr.io/manifold-cni/manifold:<deno.json-free version>)
#     -o  archive path (default dist/manifold-image.tar)
#
# Layers (same file layout as Containerfile):
#   1. Debian bookworm root file system (mmdebstrap, minbase + the packages Containerfile
#      names), from the machine's configured Debian mirror. Cached, keyed by package list,
#      suite and mirror, under $MANIFOLD_IMAGE_CACHE (default ~/.cache/manifold-image).
#   2. Manifold: with DENORT_BIN set, `deno task compile`'s dist/manifold at
#      /usr/local/bin/manifold (the "compiled" variant). Otherwise the "source" variant: deno
#      (npm package @deno/linux-x64-glibc, as scripts/setup.sh gets it) at /usr/local/bin/deno,
#      the source tree at /opt/manifold with its npm cache (DENO_DIR=/opt/manifold/deno-dir),
#      and the launcher /usr/local/bin/manifold (scripts/manifold: the compiled binary's
#      permissions and V8 flags).
# Reproducible: SOURCE_DATE_EPOCH (default: the last commit's time) sets every timestamp;
# owners are numeric, tar entries sorted, gzip without names or times. Two builds from the
# same tree and the same cached root file system give the same digest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tag="ghcr.io/manifold-cni/manifold:0.1.0"
out="dist/manifold-image.tar"
while getopts "t:o:h" opt; do
  case $opt in
  t) tag=$OPTARG ;;
  o) out=$OPTARG ;;
  *) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
log() { echo "image: $*" >&2; }
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export LC_ALL=C TZ=UTC
command -v mmdebstrap >/dev/null || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 2; }
deno_version=$(deno --version | head -n1 | awk '{print $2}')
# The packages the Containerfile installs, read from it so the two cannot drift.
packages=$(grep -oE 'no-install-recommends [a-z0-9. -]+' Containerfile | head -n1 |
  sed 's/no-install-recommends //' | tr ' ' '\n' | grep . | sort -u | paste -sd, -)
mirror=${MANIFOLD_DEBIAN_MIRROR:-$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null |
  head -n1 | awk '{print $2}')}
mirror=${mirror:-http://deb.debian.org/debian}
cache=${MANIFOLD_IMAGE_CACHE:-${HOME:-/root}/.cache/manifold-image}
mkdir -p "$cache" "$(dirname "$out")"
key=$(printf '%s\n' bookworm minbase "$packages" "$mirror" | sha256sum | cut -c1-16)
base="$cache/rootfs-$key.tar"
if [ ! -s "$base" ]; then
  log "mmdebstrap bookworm ($packages) from $mirror"
  mmdebstrap --quiet --variant=minbase --include="$packages" --mode=root \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$cache/partial-$key.tar" "$mirror" "${mirror%/debian}/debian-security bookworm-security main" >&2
  mv "$cache/partial-$key.tar" "$base"
else
  log "root file system from cache $base"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/stage"
mkdir -p "$stage/usr/local/bin" "$work/oci/blobs/sha256"
if [ -n "${DENORT_BIN:-}" ]; then
  variant=compiled
  deno task compile >&2
  install -m 0755 dist/manifold "$stage/usr/local/bin/manifold"
  env_json='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'
else
  variant=source
  denotgz="$cache/deno-linux-x64-glibc-$deno_version.tgz"
  if [ ! -s "$denotgz" ]; then
    log "deno $deno_version from the npm registry"
    (cd "$work" && npm pack --silent "@deno/linux-x64-glibc@$deno_version" >/dev/null)
    mv "$work"/deno-linux-x64-glibc-*.tgz "$denotgz"
  fi
  tar -xzf "$denotgz" -C "$work" package/deno
  install -m 0755 "$work/package/deno" "$stage/usr/local/bin/deno"
  app="$stage/opt/manifold"
  mkdir -p "$app/scripts"
  git ls-files -z main.ts deno.json deno.lock lib native | xargs -0 -I{} cp --parents {} "$app/"
  cp scripts/manifold scripts/permissions scripts/runtime-flags "$app/scripts/"
  chmod 0755 "$app/scripts/manifold"
  # The npm cache, keyed by deno.lock: only npm/ (no sqlite caches, which differ per run).
  npmkey=$(cat deno.lock deno.json | sha256sum | cut -c1-16)
  npmcache="$cache/deno-dir-$npmkey"
  if [ ! -d "$npmcache/npm" ]; then
    log "npm dependencies into $npmcache"
    rm -rf "$npmcache.tmp"
    DENO_DIR="$npmcache.tmp" deno install --quiet --frozen=true --entrypoint main.ts >&2
    mkdir -p "$npmcache" && mv "$npmcache.tmp/npm" "$npmcache/npm" && rm -rf "$npmcache.tmp"
  fi
  mkdir -p "$app/deno-dir" && cp -a "$npmcache/npm" "$app/deno-dir/npm"
  cat >"$stage/usr/local/bin/manifold" <<'SH'
#!/bin/sh
# Manifold from source (scripts/image.sh, source variant): scripts/manifold with the npm
# cache of the image. Same permissions and V8 flags as the compiled binary.
DENO_DIR=${DENO_DIR:-/opt/manifold/deno-dir} MANIFOLD_DENO=/usr/local/bin/deno
export DENO_DIR MANIFOLD_DENO
exec /opt/manifold/scripts/manifold "$@"
SH
  chmod 0755 "$stage/usr/local/bin/manifold"
  env_json='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","DENO_DIR=/opt/manifold/deno-dir"'
fi

# blob FILE MEDIATYPE → stores FILE as a blob, prints {"mediaType","digest","size"}.
blob() {
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  mv "$1" "$work/oci/blobs/sha256/$d"
  printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$2" "$d" "$s"
}
tarit() { # DIR OUT: deterministic tar of DIR's contents
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --format=posix -C "$1" -cf "$2" .
}
layer_mt=application/vnd.oci.image.layer.v1.tar+gzip
diff1=$(sha256sum "$base" | cut -d' ' -f1)
gzip -n -6 -c "$base" >"$work/l1"
l1=$(blob "$work/l1" "$layer_mt")
tarit "$stage" "$work/l2.tar"
diff2=$(sha256sum "$work/l2.tar" | cut -d' ' -f1)
gzip -n -6 -c "$work/l2.tar" >"$work/l2" && rm "$work/l2.tar"
l2=$(blob "$work/l2" "$layer_mt")
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
printf '{"architecture":"amd64","config":{"Entrypoint":["/usr/local/bin/manifold"],"Cmd":["--version"],"Env":[%s],"Labels":{"io.manifold.variant":"%s"}},"created":"%s","history":[{"created":"%s","created_by":"mmdebstrap bookworm minbase %s"},{"created":"%s","created_by":"scripts/image.sh manifold %s"}],"os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s","sha256:%s"]}}' \
  "$env_json" "$variant" "$created" "$created" "$packages" "$created" "$variant" "$diff1" "$diff2" >"$work/config"
config=$(blob "$work/config" application/vnd.oci.image.config.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":%s,"layers":[%s,%s]}' \
  "$config" "$l1" "$l2" >"$work/manifest"
manifest=$(blob "$work/manifest" application/vnd.oci.image.manifest.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' \
  "${manifest%\}},\"annotations\":{\"io.containerd.image.name\":\"$tag\",\"org.opencontainers.image.ref.name\":\"${tag##*:}\"}}" >"$work/oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
tarit "$work/oci" "$out.tmp"
mv "$out.tmp" "$out"
log "$variant variant $tag: $out ($(du -h "$out" | cut -f1)), manifest $(echo "${manifest#*\"digest\":\"}" | cut -d\" -f1)"
echo "${manifest#*\"digest\":\"}" | cut -d'"' -f1
