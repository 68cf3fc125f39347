#!/usr/bin/env bash
# Runs every test (unit and root integration) and prints a closing line
# "tests: N passed, N failed, N skipped".
#
# Then the plugin tests once more through a pack (scripts/pack.ts: the chunks an image's plugin
# calls run): a runnable copy of this tree with its pack, named by MANIFOLD_TEST_PLUGIN
# (tests/support/plugin.ts), for the suites that run the plugin's verbs as a runtime does. Their
# counts are added to the closing line. MANIFOLD_TEST_PACK=0 leaves this pass out.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log=$(mktemp)
packlog=$(mktemp)
tree=$(mktemp -d /tmp/manifold-packed.XXXXXX)
trap 'rm -rf "$log" "$packlog" "$tree"' EXIT
deno test -A --no-prompt "$@" tests/ 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# count FIELD LOG: a field of deno test's summary line.
count() {
  sed 's/\x1b\[[0-9;]*m//g' "$2" | grep -E '^(ok|FAILED) \| [0-9]+ passed' | tail -n1 |
    sed -nE "s/.*\\| ([0-9]+) $1.*/\\1/p"
}
passed=$(count passed "$log") failed=$(count failed "$log") ignored=$(count ignored "$log")
if [ "${MANIFOLD_TEST_PACK:-1}" != 0 ]; then
  echo "tests: the plugin suites again, through a pack ($tree)"
  # The suites of the plugin's verbs as a runtime calls them; faults_test and burst_test (the API's
  # faults and bursts, ≈ 160 s) are left to the first pass.
  mapfile -t suites < <(ls tests/integration/*_test.ts | grep -vE '/(faults|burst)_test\.ts$')
  suites+=(tests/conformance/conformance_test.ts tests/realapi/plugin_test.ts tests/realapi/mirror_test.ts)
  if deno run --quiet -A scripts/pack.ts --tree "$tree" >"$packlog" 2>&1; then
    MANIFOLD_TEST_PLUGIN="$tree/scripts/manifold" deno test -A --no-prompt "$@" "${suites[@]}" 2>&1 |
      tee "$packlog"
    packrc=${PIPESTATUS[0]}
    p=$(count passed "$packlog") f=$(count failed "$packlog") i=$(count ignored "$packlog")
    passed=$((${passed:-0} + ${p:-0})) failed=$((${failed:-0} + ${f:-0}))
    ignored=$((${ignored:-0} + ${i:-0}))
  else
    cat "$packlog"
    echo "tests: the pack could not be built"
    packrc=1 failed=$((${failed:-0} + 1))
  fi
  [ "$packrc" = 0 ] || [ "$rc" != 0 ] || rc=$packrc
fi
echo "tests: ${passed:-0} passed, ${failed:-0} failed, ${ignored:-0} skipped"
exit "$rc"
