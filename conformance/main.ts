/**
 * NPWG v1.3 + CNI conformance suite for CNI delegating plugins (Manifold, Multus thin, …):
 *
 * ```sh
 * deno task conformance --plugin PATH --type NAME [--kube-apiserver PATH] [--junit FILE]
 *   [--conf-template FILE] [--claims isolation] [--filter TEXT]
 *   [--daemon-command "CMD {{socket}} {{conf}} {{kubeconfig}} …" [--daemon-log FILE]]
 * ```
 *
 * Starts etcd + kube-apiserver (tests/support/kube_apiserver.ts), runs every check
 * (conformance/checks_*.ts) against the plugin through the CNI interface and the Kubernetes API
 * only, prints the table, writes JUnit XML when asked, and exits 0 only when every MUST passes
 * (2 on a usage error, 1 otherwise). Needs root (netns) and `etcd` on PATH.
 *
 * With `--daemon-command` the plugin's node daemon is started first (conformance/daemon.ts)
 * and the config names its socket: every check then runs through the daemon. A daemon that
 * does not exit 0 on SIGTERM fails the run.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { type Check, type Outcome, runCheck } from "./check.ts";
import { DAEMON_CHECKS } from "./checks_daemon.ts";
import { NAD_CHECKS } from "./checks_nad.ts";
import { RUNTIME_CHECKS } from "./checks_runtime.ts";
import { SELECTION_CHECKS } from "./checks_selection.ts";
import { STATUS_CHECKS } from "./checks_status.ts";
import type { DaemonExit } from "./daemon.ts";
import { Suite } from "./harness.ts";
import { junit, table } from "./report.ts";

/** Every check, in report order. */
export const CHECKS: Check[] = [
  ...NAD_CHECKS,
  ...SELECTION_CHECKS,
  ...STATUS_CHECKS,
  ...RUNTIME_CHECKS,
  ...DAEMON_CHECKS,
];

const USAGE = "usage: deno task conformance --plugin PATH --type NAME [--kube-apiserver PATH] " +
  "[--junit FILE] [--conf-template FILE] [--claims isolation[,…]] [--filter TEXT] " +
  '[--daemon-command "CMD …{{socket}}…{{conf}}…{{kubeconfig}}…" [--daemon-log FILE]]';

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  plugin: string;
  type: string;
  kubeApiServer?: string;
  template?: string;
  claims?: string[];
  /** Only checks whose section or name contains this text. */
  filter?: string;
  /** Called after each check (progress). */
  onOutcome?: (o: Outcome) => void;
  /** Daemon mode: the node daemon's command line (see `SuiteOptions.daemonCommand`). */
  daemonCommand?: string;
  /** Daemon mode: where its output goes (default: removed with the suite). */
  daemonLog?: string;
}

/** What {@link runConformance} found. */
export interface ConformanceRun {
  outcomes: Outcome[];
  /** Wall time, ms, the API server's and the daemon's start and stop included. */
  ms: number;
  /** Plugin calls made, by CNI command. */
  calls: Record<string, number>;
  /** Wall time inside plugin calls (spawn to exit), ms. */
  callMs: number;
  /** Daemon mode: how the daemon ended after SIGTERM. */
  daemonExit?: DaemonExit;
}

/** Runs the suite; returns the outcomes, the wall time and, in daemon mode, the daemon's end. */
export async function runConformance(opts: ConformanceOptions): Promise<ConformanceRun> {
  const t0 = performance.now();
  const suite = await Suite.start(opts);
  const outcomes: Outcome[] = [];
  try {
    for (const c of CHECKS) {
      if (opts.filter && !`${c.section} ${c.name}`.includes(opts.filter)) continue;
      const o = await runCheck(c, suite);
      outcomes.push(o);
      opts.onOutcome?.(o);
    }
  } finally {
    await suite.stop();
  }
  return {
    outcomes,
    ms: Math.round(performance.now() - t0),
    calls: suite.calls,
    callMs: Math.round(suite.callMs),
    daemonExit: suite.daemonExit,
  };
}

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        plugin: { type: "string" },
        type: { type: "string" },
        "kube-apiserver": { type: "string" },
        junit: { type: "string" },
        "conf-template": { type: "string" },
        claims: { type: "string", multiple: true },
        filter: { type: "string" },
        "daemon-command": { type: "string" },
        "daemon-log": { type: "string" },
        help: { type: "boolean" },
      },
    }));
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!values.plugin || !values.type) {
    console.error(USAGE);
    return 2;
  }
  const kubeApiServer = values["kube-apiserver"] ?? Deno.env.get("MANIFOLD_KUBE_APISERVER");
  if (!kubeApiServer) {
    console.error("no kube-apiserver: give --kube-apiserver PATH or set MANIFOLD_KUBE_APISERVER");
    return 2;
  }
  if (values["daemon-log"] && !values["daemon-command"]) {
    console.error(`--daemon-log needs --daemon-command\n${USAGE}`);
    return 2;
  }
  let run: ConformanceRun;
  try {
    run = await runConformance({
      plugin: values.plugin,
      type: values.type,
      kubeApiServer,
      template: values["conf-template"]
        ? await Deno.readTextFile(values["conf-template"])
        : undefined,
      claims: (values.claims ?? []).flatMap((c) => c.split(",")).map((c) => c.trim()),
      filter: values.filter,
      daemonCommand: values["daemon-command"],
      daemonLog: values["daemon-log"],
      onOutcome: (o) => console.error(`${o.verdict.padEnd(4)} ${o.check.section} ${o.check.name}`),
    });
  } catch (e) {
    console.error(`conformance: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  const { outcomes, ms, calls, callMs, daemonExit } = run;
  console.log(table(outcomes));
  const n = Object.values(calls).reduce((a, b) => a + b, 0);
  console.log(
    `time: ${(ms / 1000).toFixed(1)} s (${n} plugin calls: ${(callMs / 1000).toFixed(1)} s, ` +
      `${(callMs / Math.max(n, 1)).toFixed(0)} ms each on average)`,
  );
  if (values.junit) {
    await Deno.writeTextFile(values.junit, junit(outcomes, `npwg-conformance ${values.type}`, ms));
  }
  const daemonFailed = daemonExit !== undefined && daemonExit.code !== 0;
  if (daemonExit) {
    console.log(
      `daemon: exit ${daemonExit.code}${daemonExit.signal ? ` (${daemonExit.signal})` : ""}` +
        (daemonExit.killed ? ", SIGKILLed: SIGTERM did not stop it" : " after SIGTERM"),
    );
  }
  return daemonFailed || outcomes.some((o) => o.check.level === "MUST" && o.verdict === "FAIL")
    ? 1
    : 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
