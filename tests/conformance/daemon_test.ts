/**
 * The conformance suite in daemon mode (`--daemon-command`): the whole suite against Manifold
 * through a real `manifold daemon` — issue 12's "one implementation, two entry points" held to
 * the same checks as the in-process path, plus the daemon-mode one (a restart between ADD
 * and DEL) — and proof that the daemon served every request
 * (its log has one `served` line per call the checks made, by command; the config says
 * `"daemonFallback": false`, so nothing can silently run in-process). Also the harness's own
 * behaviour: command-line splitting with placeholders, a daemon that dies before its socket
 * answers. Real API server tests need root and `MANIFOLD_KUBE_APISERVER`.
 */

import assert from "node:assert/strict";
import { CHECKS, runConformance } from "../../conformance/main.ts";
import { fillCommand } from "../../conformance/daemon.ts";
import { DEFAULT_TEMPLATE } from "../../conformance/harness.ts";
import { kubeApiServerBinary, realApiIgnored } from "../support/kube_apiserver.ts";
import { MANIFOLD } from "../support/plugin.ts";

const ignore = realApiIgnored() || Deno.uid() !== 0;
const common = { ignore, sanitizeOps: false, sanitizeResources: false };
const MAIN = new URL("../../conformance/main.ts", import.meta.url).pathname;

/** Manifold's daemon, as README's "Conformance" gives it. */
const DAEMON = `${MANIFOLD} daemon --conf {{conf}} --socket {{socket}} ` +
  "--kubeconfig {{kubeconfig}} --node-name {{nodeName}}";

/** Manifold's daemon log (JSON lines): every line, and the `served` lines counted by command. */
async function daemonLog(path: string) {
  const lines = (await Deno.readTextFile(path)).split("\n").filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const served: Record<string, number> = {};
  for (const l of lines.filter((l) => l.msg === "served")) {
    const c = String(l.command);
    served[c] = (served[c] ?? 0) + 1;
  }
  return { lines, served };
}

Deno.test("daemon command: words split like a shell's, placeholders filled per word", () => {
  const v = { socket: "/run/a b/d.sock", conf: "/c.json" };
  assert.deepEqual(
    fillCommand(` d  --socket {{socket}} --x='{{conf}} y' "q\\"z" a\\ b {{other}}`, v),
    ["d", "--socket", "/run/a b/d.sock", "--x=/c.json y", 'q"z', "a b", "{{other}}"],
  );
  assert.deepEqual(fillCommand("d ''", v), ["d", ""]);
  assert.throws(() => fillCommand("d 'x", v), /unterminated/);
  assert.throws(() => fillCommand("   ", v), /empty/);
});

Deno.test({
  name: "Manifold through manifold daemon: every check passes, every request served by the daemon",
  ...common,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const log = `${dir}/daemon.log`;
      const run = await runConformance({
        plugin: MANIFOLD,
        type: "manifold",
        claims: ["isolation"],
        daemonCommand: DAEMON,
        daemonLog: log,
      });
      assert.deepEqual(
        run.outcomes.filter((o) => o.verdict !== "PASS").map((o) =>
          `${o.verdict} ${o.check.name}: ${o.reason}`
        ),
        [],
      );
      assert.equal(run.outcomes.length, CHECKS.length);
      assert.deepEqual(run.daemonExit, { code: 0, signal: null, killed: false });

      const { lines, served } = await daemonLog(log);
      // VERSION is answered by the binary itself (its config names no daemon).
      const { VERSION: _, ...forwarded } = run.calls;
      assert.ok((forwarded.ADD ?? 0) >= CHECKS.length - 2, JSON.stringify(run.calls));
      assert.deepEqual(served, forwarded, "one served line per forwarded call, by command");
      assert.deepEqual(
        lines.filter((l) => l.level === "error").map((l) => l.msg),
        [],
        "the daemon logged no error",
      );
      console.log(`daemon mode: ${run.ms} ms, calls ${JSON.stringify(run.calls)}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "the served count sees requests that bypass the daemon (a template naming no socket)",
  ...common,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const log = `${dir}/daemon.log`;
      const run = await runConformance({
        plugin: MANIFOLD,
        type: "manifold",
        template: DEFAULT_TEMPLATE, // no daemonSocket: the binary runs every request itself
        filter: "§6.2",
        daemonCommand: DAEMON,
        daemonLog: log,
      });
      assert.deepEqual(run.outcomes.map((o) => o.verdict), ["PASS"]);
      assert.ok((run.calls.ADD ?? 0) >= 1, JSON.stringify(run.calls));
      assert.deepEqual((await daemonLog(log)).served, {});
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "a daemon that forgets its attachments when restarted fails the restart check",
  ...common,
  async fn() {
    const { outcomes } = await runConformance({
      plugin: MANIFOLD,
      type: "manifold",
      filter: "daemon restarted",
      // The same daemon, but its attachment cache (cniDir) is wiped whenever it starts.
      daemonCommand: `sh -c 'rm -rf {{cniDir}}/* && exec ${DAEMON}'`,
    });
    assert.deepEqual(outcomes.map((o) => o.verdict), ["FAIL"]);
    assert.match(outcomes[0].reason, /CHECK after the daemon restarted failed/);
  },
});

Deno.test({
  name: "a daemon that exits before its socket answers fails the run with its output",
  ...common,
  async fn() {
    await assert.rejects(
      runConformance({
        plugin: MANIFOLD,
        type: "manifold",
        daemonCommand: `${MANIFOLD} daemon --conf {{conf}}/missing --socket {{socket}}`,
      }),
      /the daemon exited \(code 1\) before its socket answered; its output ends:\n.*--conf \/.*\/missing: Not a directory/s,
    );
  },
});

Deno.test({
  name: "CLI: a daemon that does not exit 0 on SIGTERM fails the run; --daemon-log needs a command",
  ...common,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      // Listens like a daemon, but exits 3 on SIGTERM (its socket removed, so it can be started
      // again); VERSION (not forwarded) passes anyway. It is stopped twice: between the two
      // clusterNetwork forms (the run goes on, with the daemon started again) and at the end;
      // either bad exit fails the run after the table.
      await Deno.writeTextFile(
        `${dir}/fake.ts`,
        `const l = Deno.listen({ transport: "unix", path: Deno.args[0] });
        Deno.addSignalListener("SIGTERM", () => { Deno.removeSync(Deno.args[0]); Deno.exit(3); });
        for await (const c of l) c.close();`,
      );
      const cli = (args: string[]) =>
        new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", MAIN, "--kube-apiserver", kubeApiServerBinary()!, ...args],
          stdout: "piped",
          stderr: "piped",
        }).output();
      const common = ["--plugin", MANIFOLD, "--type", "manifold", "--filter", "VERSION answers"];
      const log = `${dir}/daemon.log`;
      const bad = await cli([
        ...common,
        "--daemon-command",
        `${Deno.execPath()} run -A ${dir}/fake.ts {{socket}}`,
        "--daemon-log",
        log,
      ]);
      const out = new TextDecoder().decode(bad.stdout);
      assert.match(out, /1 checks: 1 PASS/);
      assert.match(new TextDecoder().decode(bad.stderr), /PASS \[directory\] CNI §VERSION/);
      assert.match(out, /daemon: exit 3 after SIGTERM/);
      assert.equal(bad.code, 1, out);
      assert.equal(await Deno.readTextFile(log), "");
      const usage = await cli([...common, "--daemon-log", log]);
      assert.equal(usage.code, 2);
      assert.match(new TextDecoder().decode(usage.stderr), /--daemon-log needs --daemon-command/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
