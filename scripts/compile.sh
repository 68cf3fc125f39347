#!/usr/bin/env bash
# Builds dist/manifold, one executable for /opt/cni/bin, with the same permissions as
# scripts/manifold and the V8 code cache disabled (a root binary must not load code from
# a cache directory others can write).
#
# `deno compile` needs the `denort` runtime of the same Deno version. It is downloaded on
# connected machines; air-gapped builders set DENORT_BIN=/path/to/denort.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
version=$(deno --version | head -n1 | awk '{print $2}')
if [ -n "${DENORT_BIN:-}" ]; then
  if [ ! -x "$DENORT_BIN" ]; then
    echo "compile: DENORT_BIN=$DENORT_BIN is not an executable file" >&2
    exit 2
  fi
  export DENORT_BIN
fi
mkdir -p dist
# Every module of lib/ and native/ is embedded: main.ts and lib's lazyImport (lib/util/lazy.ts)
# load modules through computed specifiers, which the module graph does not follow.
includes=$(find lib native -name '*.ts' | LC_ALL=C sort | sed 's/^/--include /')
# shellcheck disable=SC2046,SC2086
if ! deno compile --quiet --no-code-cache --cached-only --no-check \
  $(cat scripts/permissions scripts/runtime-flags) $includes \
  -o dist/manifold main.ts 2>dist/compile.err; then
  cat dist/compile.err >&2
  if [ -z "${DENORT_BIN:-}" ]; then
    cat >&2 <<MSG
compile: no denort runtime for Deno $version is reachable from this machine.
  Supply one and run again:  DENORT_BIN=/path/to/denort deno task compile
  (denort-x86_64-unknown-linux-gnu.zip of Deno $version, unpacked; it is published with
  each Deno release).
MSG
  fi
  exit 2
fi
rm -f dist/compile.err
echo "compile: built dist/manifold ($(du -h dist/manifold | cut -f1))"
