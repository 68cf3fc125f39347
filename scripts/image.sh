#!/usr/bin/env bash
# Writes an OCI image archive of Manifold without a container engine or a registry.
#
#   scripts/image.sh [-t TAG] [-o OUT.tar]   the image archive (root, mmdebstrap)
#   scripts/image.sh -s DIR                  only Manifold's files, into DIR (for Containerfile)
#     -t  image reference (default ghcr.io/manifold-cni/manifold:<VERSION of main.ts>)
#     -o  archive path (default dist/manifold-image.tar)
#     -s  write the files of layer 2 below into DIR (must not exist) and stop
#   Environment: DENORT_BIN (the compiled variant), MANIFOLD_DEBIAN_MIRROR (a Debian mirror
#   URL, e.g. a local one), MANIFOLD_IMAGE_CACHE (default ~/.cache/manifold-image),
#   SOURCE_DATE_EPOCH (default: the last commit's time).
#
# Layers (the file layout docs/install.md "The image" lists; Containerfile makes the same):
#   1. Debian bookworm root file system (mmdebstrap minbase + the packages Containerfile
#      names), from $MANIFOLD_DEBIAN_MIRROR or the machine's configured Debian mirror. Cached,
#      keyed by package list, suite, mirror and its epoch, under $MANIFOLD_IMAGE_CACHE.
#   2. Manifold: with DENORT_BIN set, `deno task compile`'s dist/manifold at
#      /usr/local/bin/manifold (the "compiled" variant). Otherwise the "source" variant: deno
#      (npm package @deno/linux-x64-glibc, as scripts/setup.sh gets it) at /usr/local/bin/deno,
#      the source tree at /opt/manifold with its npm cache (/opt/manifold/deno-dir/npm) and its
#      pack (/opt/manifold/pack, scripts/pack.ts: what plugin calls run), and
#      the launcher /usr/local/bin/manifold (scripts/image-launcher: scripts/manifold with the
#      compiled binary's permissions and V8 flags, writing nothing on a read-only root).
# Reproducible: every entry of layer 2 has mtime SOURCE_DATE_EPOCH and owner 0:0; every entry
# of layer 1 has mtime ROOTFS_EPOCH (fixed below, so the base layer does not change with each
# commit) and Debian's numeric owners; tar entries sorted by name, no user or group names,
# gzip without names or times. Two builds from the same tree and the same cached root file
# system give the same digest (tests/image/image_test.ts).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
version=$(sed -n 's/^export const VERSION = "\(.*\)";$/\1/p' main.ts)
tag="ghcr.io/manifold-cni/manifold:$version"
out="dist/manifold-image.tar"
stage_only=
while getopts "t:o:s:h" opt; do
  case $opt in
  t) tag=$OPTARG ;;
  o) out=$OPTARG ;;
  s) stage_only=$OPTARG ;;
  *) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
log() { echo "image: $*" >&2; }
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
# 2025-01-01T00:00:00Z: the base layer's timestamps; change it to rebuild the base on purpose.
ROOTFS_EPOCH=${MANIFOLD_ROOTFS_EPOCH:-1735689600}
export LC_ALL=C TZ=UTC
deno_version=$(deno --version | head -n1 | awk '{print $2}')
cache=${MANIFOLD_IMAGE_CACHE:-${HOME:-/root}/.cache/manifold-image}
mkdir -p "$cache"

work=$(mktemp -d)
trap 'rm -rf "$work" "$cache"/*."$$"' EXIT
# tarit DIR OUT EPOCH [OWNER-ARGS…]: deterministic tar of DIR's contents.
tarit() {
  local dir=$1 file=$2 epoch=$3
  shift 3
  tar --sort=name --mtime="@$epoch" --numeric-owner "$@" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --format=posix -C "$dir" -cf "$file" .
}

# Layer 2: Manifold's files, staged in $stage.
if [ -n "$stage_only" ]; then
  if [ -e "$stage_only" ]; then log "-s $stage_only: exists (give a new directory)"; exit 2; fi
  stage=$stage_only
else
  stage="$work/stage"
fi
mkdir -p "$stage/usr/local/bin"
if [ -n "${DENORT_BIN:-}" ]; then
  variant=compiled
  deno task compile >&2
  install -m 0755 dist/manifold "$stage/usr/local/bin/manifold"
else
  variant=source
  denotgz="$cache/deno-linux-x64-glibc-$deno_version.tgz"
  if [ ! -s "$denotgz" ]; then
    log "deno $deno_version from the npm registry"
    (cd "$work" && npm pack --silent "@deno/linux-x64-glibc@$deno_version" >/dev/null)
    # Renamed into place within the cache dir: another build reading it sees all or nothing.
    mv "$work"/deno-linux-x64-glibc-*.tgz "$denotgz.$$" && mv -f "$denotgz.$$" "$denotgz"
  fi
  tar -xzf "$denotgz" -C "$work" package/deno
  install -m 0755 "$work/package/deno" "$stage/usr/local/bin/deno"
  app="$stage/opt/manifold"
  mkdir -p "$app/scripts"
  git ls-files -z main.ts deno.json deno.lock lib native | xargs -0 -I{} cp --parents {} "$app/"
  cp scripts/manifold scripts/permissions scripts/runtime-flags "$app/scripts/"
  chmod 0755 "$app/scripts/manifold"
  # The plugin call's code in chunks (scripts/pack.ts), which the launcher runs for plugin calls.
  deno run --quiet -A scripts/pack.ts "$app/pack" >&2
  # The npm cache, keyed by deno.lock: only npm/ (no SQLite caches, which differ per run).
  npmkey=$(cat deno.lock deno.json | sha256sum | cut -c1-16)
  npmcache="$cache/deno-dir-$npmkey"
  if [ ! -d "$npmcache/npm" ]; then
    log "npm dependencies into $npmcache"
    DENO_DIR="$npmcache.$$" deno install --quiet --frozen=true --entrypoint main.ts >&2
    # A build running at the same time may have put it there first: then keep that one.
    mkdir -p "$npmcache" && { mv -T "$npmcache.$$/npm" "$npmcache/npm" 2>/dev/null || true; }
    rm -rf "$npmcache.$$"
  fi
  mkdir -p "$app/deno-dir" && cp -a "$npmcache/npm" "$app/deno-dir/npm"
  # deno's markers "warned about a package's build scripts", named by a hash of the directory
  # `deno install` ran in (the builder's checkout): not reproducible, and the launcher's
  # `deno run --quiet` prints no such warning without them.
  find "$app/deno-dir/npm" -name '.scripts-warned-*' -delete
  install -m 0755 scripts/image-launcher "$stage/usr/local/bin/manifold"
fi
# Modes as in the tree, whatever the builder's umask: directories 0755, files 0644 or 0755.
chmod -R u=rwX,go=rX "$stage"
if [ -n "$stage_only" ]; then
  log "$variant variant: Manifold's files in $stage_only (COPY $stage_only/ / in Containerfile)"
  exit 0
fi

# Layer 1: the Debian root file system.
command -v mmdebstrap >/dev/null || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 2; }
[ "$(id -u)" = 0 ] || { log "needs root (mmdebstrap --mode=root)"; exit 2; }
# The packages the Containerfile installs, read from it so the two cannot drift.
packages=$(grep -oE 'no-install-recommends [a-z0-9. -]+' Containerfile | head -n1 |
  sed 's/no-install-recommends //' | tr ' ' '\n' | grep . | sort -u | paste -sd, -)
mirror=${MANIFOLD_DEBIAN_MIRROR:-$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null |
  head -n1 | awk '{print $2}')}
mirror=${mirror:-http://deb.debian.org/debian}
key=$(printf '%s\n' rootfs-v3 bookworm minbase "$packages" "$mirror" "$ROOTFS_EPOCH" | sha256sum | cut -c1-16)
base="$cache/rootfs-$key.tar"
mkdir -p "$(dirname "$out")"
if [ ! -s "$base" ]; then
  log "mmdebstrap bookworm ($packages) from $mirror"
  # SOURCE_DATE_EPOCH makes mmdebstrap's own output reproducible (its manual, ENVIRONMENT);
  # the host's resolv.conf and hostname it copies are replaced (the runtime mounts its own);
  # apt's partial/ directories belong to _apt (measured: two runs gave root in one, _apt in the
  # other, the only difference between them).
  SOURCE_DATE_EPOCH=$ROOTFS_EPOCH mmdebstrap --quiet --variant=minbase --include="$packages" \
    --mode=root --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='printf "" >"$1/etc/resolv.conf"; echo localhost >"$1/etc/hostname"' \
    --customize-hook='chroot "$1" chown _apt:root /var/cache/apt/archives/partial /var/lib/apt/lists/partial' \
    bookworm "$work/rootfs" "$mirror" \
    "${mirror%/debian}/debian-security bookworm-security main" >&2
  tarit "$work/rootfs" "$work/rootfs.tar" "$ROOTFS_EPOCH"
  rm -rf "$work/rootfs"
  mv "$work/rootfs.tar" "$base.$$" && mv -f "$base.$$" "$base"
else
  log "root file system from cache $base"
fi

# blob FILE MEDIATYPE → stores FILE as a blob, prints {"mediaType","digest","size"}.
mkdir -p "$work/oci/blobs/sha256"
blob() {
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  mv "$1" "$work/oci/blobs/sha256/$d"
  printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$2" "$d" "$s"
}
layer_mt=application/vnd.oci.image.layer.v1.tar+gzip
diff1=$(sha256sum "$base" | cut -d' ' -f1)
gzip -n -6 -c "$base" >"$work/l1"
l1=$(blob "$work/l1" "$layer_mt")
tarit "$stage" "$work/l2.tar" "$SOURCE_DATE_EPOCH" --owner=0 --group=0
diff2=$(sha256sum "$work/l2.tar" | cut -d' ' -f1)
gzip -n -6 -c "$work/l2.tar" >"$work/l2" && rm "$work/l2.tar"
l2=$(blob "$work/l2" "$layer_mt")
rootfs_created=$(date -u -d "@$ROOTFS_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
printf '{"architecture":"amd64","config":{"Entrypoint":["/usr/local/bin/manifold"],"Cmd":["--version"],"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Labels":{"io.manifold.variant":"%s"}},"created":"%s","history":[{"created":"%s","created_by":"mmdebstrap bookworm minbase %s"},{"created":"%s","created_by":"scripts/image.sh manifold %s"}],"os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s","sha256:%s"]}}' \
  "$variant" "$created" "$rootfs_created" "$packages" "$created" "$variant" "$diff1" "$diff2" >"$work/config"
config=$(blob "$work/config" application/vnd.oci.image.config.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":%s,"layers":[%s,%s]}' \
  "$config" "$l1" "$l2" >"$work/manifest"
manifest=$(blob "$work/manifest" application/vnd.oci.image.manifest.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' \
  "${manifest%\}},\"annotations\":{\"io.containerd.image.name\":\"$tag\",\"org.opencontainers.image.ref.name\":\"${tag##*:}\"}}" >"$work/oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
tarit "$work/oci" "$out.tmp" "$SOURCE_DATE_EPOCH" --owner=0 --group=0
mv "$out.tmp" "$out"
log "$variant variant $tag: $out ($(du -h "$out" | cut -f1)), manifest $(echo "${manifest#*\"digest\":\"}" | cut -d\" -f1)"
echo "${manifest#*\"digest\":\"}" | cut -d'"' -f1
