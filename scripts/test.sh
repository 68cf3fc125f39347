#!/usr/bin/env bash
# Runs every test (unit and root integration) and prints a closing line
# "tests: N passed, N failed, N skipped".
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
deno test -A --no-prompt "$@" tests/ 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^(ok|FAILED) \| [0-9]+ passed' | tail -n1)
passed=$(sed -nE 's/.*\| ([0-9]+) passed.*/\1/p' <<<"$summary")
failed=$(sed -nE 's/.*\| ([0-9]+) failed.*/\1/p' <<<"$summary")
ignored=$(sed -nE 's/.*\| ([0-9]+) ignored.*/\1/p' <<<"$summary")
echo "tests: ${passed:-0} passed, ${failed:-0} failed, ${ignored:-0} skipped"
exit "$rc"
