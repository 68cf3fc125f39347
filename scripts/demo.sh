#!/usr/bin/env bash
# The main job end to end (see scripts/demo.ts). Needs root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec deno run -A --quiet "$root/scripts/demo.ts"
