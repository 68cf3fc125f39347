/**
 * deploy/monitoring/: what an operator deploys to watch Manifold.
 * - `manifold-rules.yaml` (plain Prometheus rules) and `prometheusrule.yaml` (the Prometheus
 *   Operator's PrometheusRule) hold the same groups;
 * - `promtool check rules` and `promtool test rules manifold-rules_test.yaml` pass (each alert
 *   fires on trouble and stays silent on a healthy node);
 * - a live `manifold daemon`'s /metrics, after a real ADD and DEL, passes `promtool check metrics`,
 *   and every metric named by an alert or a query of the Grafana dashboard is one it exports.
 * promtool comes from Debian's `prometheus` package (scripts/setup.sh installs it); without it the
 * promtool tests are skipped with one line.
 */

import assert from "node:assert/strict";
import { parse } from "yaml";
import { loopbackPort } from "../support/ports.ts";
import { done, expectOk, world } from "../support/world.ts";
import { isRoot } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";
import { until } from "../support/wait.ts";

const DIR = new URL("../../deploy/monitoring/", import.meta.url).pathname;

/** Whether promtool is on PATH (printing the skip line once when not). */
function havePromtool(): boolean {
  try {
    new Deno.Command("promtool", { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync();
    return true;
  } catch {
    console.log("promtool tests skipped: install Debian's prometheus package (scripts/setup.sh)");
    return false;
  }
}
const promtool = havePromtool();

/** Runs promtool in deploy/monitoring/ with `args` (and `stdin`); returns code and output. */
async function runPromtool(args: string[], stdin?: string) {
  const child = new Deno.Command("promtool", {
    args,
    cwd: DIR,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, text: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

/** The rule groups of both files. */
async function ruleFiles() {
  const plain = parse(await Deno.readTextFile(`${DIR}manifold-rules.yaml`));
  const operator = parse(await Deno.readTextFile(`${DIR}prometheusrule.yaml`));
  return { plain, operator };
}

/** Metric names an expression reads (Manifold's, the process and runtime ones). */
function metricsOf(expr: string): string[] {
  return [...expr.matchAll(/\b((?:manifold|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1]);
}

Deno.test("monitoring: the PrometheusRule holds exactly the plain rules file's groups", async () => {
  const { plain, operator } = await ruleFiles();
  assert.equal(operator.apiVersion, "monitoring.coreos.com/v1");
  assert.equal(operator.kind, "PrometheusRule");
  assert.deepEqual(operator.spec, plain);
  const alerts = plain.groups.flatMap((g: { rules: { alert: string }[] }) => g.rules);
  for (const a of alerts) {
    assert.match(a.labels?.severity ?? "", /^(warning|critical)$/, `${a.alert} has a severity`);
    assert.ok(a.annotations?.summary && a.annotations?.description, `${a.alert} says what to do`);
  }
});

Deno.test({
  name: "monitoring: promtool check rules and the alerts' unit tests pass",
  ignore: !promtool,
  async fn() {
    const check = await runPromtool(["check", "rules", "manifold-rules.yaml"]);
    assert.equal(check.code, 0, check.text);
    const unit = await runPromtool(["test", "rules", "manifold-rules_test.yaml"]);
    assert.equal(unit.code, 0, unit.text);
    assert.match(unit.text, /SUCCESS/);
    // Every alert has a unit test that expects it to fire.
    const tests = parse(await Deno.readTextFile(`${DIR}manifold-rules_test.yaml`));
    const tested = new Set<string>();
    for (const t of tests.tests) {
      for (const a of t.alert_rule_test ?? []) if (a.exp_alerts.length) tested.add(a.alertname);
    }
    const { plain } = await ruleFiles();
    for (const g of plain.groups) for (const r of g.rules) assert.ok(tested.has(r.alert), r.alert);
  },
});

Deno.test({
  name:
    "monitoring: a live daemon's /metrics passes promtool check metrics; alerts and dashboard name only its metrics",
  ignore: !isRoot(),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    const port = loopbackPort();
    const d = await startDaemon(await w.scratch.dir(), w.conf, {
      flags: ["--metrics-address", `127.0.0.1:${port}`],
    });
    try {
      await until(() => w.api.requests.some((r) => r.query.includes("watch")), "the NAD watch");
      expectOk(await w.call("ADD", { config: d.conf }), "daemon ADD");
      expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL");
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const families = new Map<string, string>();
      for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) families.set(m[1], m[2]);
      assert.ok(families.has("manifold_cni_requests_total"), "the daemon's own series");

      if (promtool) {
        const lint = await runPromtool(["check", "metrics"], text);
        assert.equal(lint.code, 0, lint.text);
      }

      const exported = (name: string) => {
        const base = name.replace(/_(bucket|sum|count)$/, "");
        return families.has(name) || families.get(base) === "histogram";
      };
      const exprs: string[] = [];
      const { plain } = await ruleFiles();
      for (const g of plain.groups) for (const r of g.rules) exprs.push(r.expr);
      const dash = JSON.parse(await Deno.readTextFile(`${DIR}grafana-dashboard.json`));
      for (const p of dash.panels) for (const t of p.targets) exprs.push(t.expr);
      for (const v of dash.templating.list) if (v.definition) exprs.push(v.definition);
      const unknown = exprs.flatMap(metricsOf).filter((n) => !exported(n));
      assert.deepEqual([...new Set(unknown)], [], "metrics no daemon exports");
      assert.ok(exprs.flatMap(metricsOf).length >= 15, "the queries were read");
    } finally {
      d.kill("SIGKILL");
      await d.exited();
      await done(w);
    }
  },
});
