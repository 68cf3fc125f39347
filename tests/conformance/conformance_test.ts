/**
 * The conformance suite's own tests: every check can fail. The suite runs against a
 * deliberately broken delegating plugin (tests/fixtures/conformance/broken_plugin.ts) with two
 * sets of faults, and the FAILs must be exactly the checks those faults (and the fixture's
 * never-implemented features) break (its missing `ipam-claim-reference` transport is INFO, not
 * FAIL; tests/conformance/verdicts_test.ts holds the Multus-like behaviours); against Manifold
 * (claiming isolation), with `clusterNetwork` as a .conflist path and as a directory, every
 * check passes but the daemon-mode ones (SKIP here; tests/conformance/daemon_test.ts runs them);
 * the CLI's exit status and JUnit follow the MUSTs, and an unclaimed §7.4 is a SKIP.
 * Needs root and `MANIFOLD_KUBE_APISERVER` (else skipped with the harness's one line).
 */

import assert from "node:assert/strict";
import { CHECKS, runConformance } from "../../conformance/main.ts";
import type { Outcome } from "../../conformance/check.ts";
import { kubeApiServerBinary, realApiIgnored } from "../support/kube_apiserver.ts";
import { MANIFOLD } from "../support/plugin.ts";

const ignore = realApiIgnored() || Deno.uid() !== 0;
const common = { ignore, sanitizeOps: false, sanitizeResources: false };
const BROKEN = new URL("../fixtures/conformance/broken-plugin", import.meta.url).pathname;
const BROKEN_BAD_VERSION = `${BROKEN}-bad-version`;
const MAIN = new URL("../../conformance/main.ts", import.meta.url).pathname;

/** The one check whose name contains `fragment` (fails the test when not exactly one). */
function check(fragment: string): string {
  const hits = CHECKS.filter((c) => c.name.includes(fragment));
  assert.equal(hits.length, 1, `"${fragment}" names ${hits.length} checks`);
  return hits[0].name;
}

/** Checks that fail against the fixture whatever its faults (features it never implements). */
const UNIMPLEMENTED = [
  '"default-route": the default route goes via',
  '"default-route" elsewhere',
  '"ipam-claim-reference" with "ips"',
  "namespaceIsolation",
  "cniVersion 0.3.1",
  "cniVersion 0.4.0",
  "cniVersion 1.1.0",
  "STATUS (1.1.0)",
];

/** INFO checks the fixture does not satisfy (the spec defines no requirement to FAIL). */
const INFO = ['"ipam-claim-reference" reaches'];

const CAP_KEYS = ['"ips"', '"mac"', '"portMappings"', '"bandwidth"', '"infiniband-guid"'];

/** Fault → the checks it breaks. */
const RUN_A: Record<string, string[]> = {
  "runtimeConfig-everywhere": ["runtimeConfig goes to the default network only"],
  "default-last": ["attached before any selected network"],
  "no-name-injection": ["the NAD's name is injected"],
  "no-rollback": ["a failed ADD undoes"],
  "status-first-interface": ["status interface and mac from", "status ips from the first"],
  "no-capability-check": CAP_KEYS.map((k) => `${k} without a plugin declaring`),
  "no-disk-lookup": [
    "no spec.config: on-disk .conflist by name",
    ".conflist before .conf",
    "no conflist: on-disk .conf by name",
  ],
  // A missing "default" key is §5.3.6's finding only: §5.2 asserts no second `true`.
  "status-missing-default": ["required keys name and default"],
  "check-unsupported": [
    "ADD → CHECK → DEL → DEL",
    "cniVersion 1.0.0",
    "CHECK gives every plugin",
  ],
  "json-first-only": ["JSON form", "already used by a previous attachment"],
  "same-network-once": ["same network twice"],
};

const RUN_B: Record<string, string[]> = {
  "conf-before-conflist": [".conflist before .conf"],
  "status-extra-key": ["no unreserved keys"],
  "status-bare-name": ["carries the NAD's namespace"],
  "default-entry-false": ["exactly one status entry"],
  "no-selection-runtimeConfig": CAP_KEYS.map((k) => `${k} → runtimeConfig`),
  "cni-args-ignored": ['"cni-args" → args.cni'],
  "namespace-key-ignored": ['"namespace" selects'],
  "no-prevResult": ["prevResult chained", "CHECK gives every plugin"],
  "del-stops-on-error": ["one failed detachment does not stop"],
  "continue-after-failure": ["later attachments are not attempted"],
  "del-needs-netns": ["empty CNI_NETNS"],
  "del-not-idempotent": ["ADD → CHECK → DEL → DEL"],
  "comma-namespace-ignored": ["comma form"],
  "no-default-without-selection": ["without a selection is attached"],
  "missing-config-skipped": ["nothing on disk: the request fails"],
  "disk-before-spec": ["spec.config wins"],
  "interface-ignored": [
    '"interface" → CNI_IFNAME',
    "already used by a previous attachment",
    "required keys name and default",
    "status interface and mac from",
  ],
  "del-in-order": [
    "configlist DEL runs the plugins in reverse",
    "DEL detaches the networks in reverse",
  ],
  "bad-version": ["VERSION answers"],
};

async function template(faults: string[]): Promise<string> {
  const t = JSON.parse(
    (await import("../../conformance/harness.ts")).DEFAULT_TEMPLATE,
  ) as Record<string, unknown>;
  return JSON.stringify({ ...t, faults });
}

function verdicts(outcomes: Outcome[], v: string): string[] {
  return outcomes.filter((o) => o.verdict === v).map((o) => o.check.name).sort();
}

/** Checks of daemon mode (conformance/checks_daemon.ts): SKIP in these in-process runs. */
const DAEMON_ONLY = ["node daemon restarted"];

async function brokenRun(
  plugin: string,
  faults: Record<string, string[]>,
  skipped: string[] = DAEMON_ONLY,
) {
  const { outcomes, ms } = await runConformance({
    plugin,
    type: "broken",
    template: await template(Object.keys(faults).filter((f) => f !== "bad-version")),
    claims: ["isolation"],
    forms: ["conflist"],
  });
  const expected = [...new Set([...Object.values(faults).flat(), ...UNIMPLEMENTED].map(check))]
    .filter((n) => !skipped.map(check).includes(n)).sort();
  const fails = outcomes.filter((o) => o.verdict === "FAIL");
  assert.deepEqual(
    verdicts(outcomes, "FAIL"),
    expected,
    `FAILs (${ms} ms):\n${fails.map((o) => `${o.check.name}: ${o.reason}`).join("\n")}`,
  );
  assert.deepEqual(verdicts(outcomes, "SKIP"), skipped.map(check).sort());
  assert.deepEqual(verdicts(outcomes, "INFO"), INFO.map(check).sort());
  assert.equal(outcomes.length, CHECKS.length);
}

Deno.test("every check has a section and a unique name", () => {
  const names = CHECKS.map((c) => c.name);
  assert.equal(new Set(names).size, names.length);
  for (const c of CHECKS) assert.match(c.section, /^(NPWG §\d|CNI §)/);
});

Deno.test({
  name: "broken fixture, faults A: exactly the broken checks FAIL",
  ...common,
  fn: () => brokenRun(BROKEN, RUN_A),
});

Deno.test({
  name: "broken fixture, faults B: exactly the broken checks FAIL (1.0.0 SKIPs: not claimed)",
  ...common,
  fn: () => brokenRun(BROKEN_BAD_VERSION, RUN_B, ["cniVersion 1.0.0", ...DAEMON_ONLY]),
});

Deno.test({
  name: "Manifold (claiming isolation), both clusterNetwork forms: every check passes " +
    "(daemon-mode ones SKIP)",
  ...common,
  async fn() {
    const { outcomes } = await runConformance({
      plugin: MANIFOLD,
      type: "manifold",
      claims: ["isolation"],
    });
    assert.deepEqual(
      outcomes.filter((o) => o.verdict !== "PASS").map((o) =>
        `${o.verdict} ${o.check.name}: ${o.reason}`
      ),
      DAEMON_ONLY.map((c) => `SKIP ${check(c)}: no node daemon (run with --daemon-command)`),
    );
    assert.equal(outcomes.length, CHECKS.length);
  },
});

Deno.test({
  name: "CLI: exit 1 and a JUnit failure on a MUST FAIL, exit 0 when the MUSTs pass, 2 on usage",
  ...common,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const tpl = `${dir}/tpl.json`;
      await Deno.writeTextFile(tpl, await template(["default-last"]));
      const cli = (args: string[]) =>
        new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", MAIN, "--kube-apiserver", kubeApiServerBinary()!, ...args],
          stdout: "piped",
          stderr: "piped",
        }).output();
      const bad = await cli([
        "--plugin",
        BROKEN,
        "--type",
        "broken",
        "--conf-template",
        tpl,
        "--filter",
        "§6.2",
        "--junit",
        `${dir}/a.xml`,
      ]);
      const out = new TextDecoder().decode(bad.stdout);
      assert.equal(bad.code, 1, out);
      assert.match(
        out,
        /NPWG §6\.2 +the default network is attached before .* MUST +FAIL +ADD order/,
      );
      const xml = await Deno.readTextFile(`${dir}/a.xml`);
      assert.match(xml, /tests="1" failures="1" skipped="0"/);
      assert.match(xml, /<failure message="ADD order: \[&quot;/);
      // Unclaimed isolation: SKIP with the reason, and a SKIP does not fail the run.
      const good = await cli(["--plugin", MANIFOLD, "--type", "manifold", "--filter", "§7.4"]);
      const goodOut = new TextDecoder().decode(good.stdout);
      assert.equal(good.code, 0, goodOut);
      assert.match(goodOut, /MUST +SKIP +the plugin does not claim namespace isolation/);
      const usage = await cli(["--type", "x"]);
      assert.equal(usage.code, 2);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
