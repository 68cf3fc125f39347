/**
 * NPWG v1.3 + CNI conformance suite for CNI delegating plugins (Manifold, Multus thin, …):
 *
 * ```sh
 * deno task conformance --plugin PATH --type NAME [--kube-apiserver PATH] [--junit FILE]
 *   [--conf-template FILE] [--claims isolation] [--filter TEXT]
 *   [--cluster-network both|conflist|directory]
 *   [--daemon-command "CMD {{socket}} {{conf}} {{kubeconfig}} …" [--daemon-log FILE]]
 * ```
 *
 * Every check runs once per `clusterNetwork` form (default both: the default network named by
 * its `.conflist` path, then by its directory); a check whose verdict differs between the forms
 * is reported with its worse verdict and a reason that names the form it failed in.
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
import { type Check, type Outcome, runCheck, type Verdict } from "./check.ts";
import { DAEMON_CHECKS } from "./checks_daemon.ts";
import { GC_CHECKS } from "./checks_gc.ts";
import { NAD_CHECKS } from "./checks_nad.ts";
import { RUNTIME_CHECKS } from "./checks_runtime.ts";
import { SELECTION_CHECKS } from "./checks_selection.ts";
import { STATUS_CHECKS } from "./checks_status.ts";
import type { DaemonExit } from "./daemon.ts";
import { type ClusterNetworkForm, Suite } from "./harness.ts";
import { junit, table } from "./report.ts";

/** Every check, in report order. */
export const CHECKS: Check[] = [
  ...NAD_CHECKS,
  ...SELECTION_CHECKS,
  ...STATUS_CHECKS,
  ...RUNTIME_CHECKS,
  ...GC_CHECKS,
  ...DAEMON_CHECKS,
];

/** Both `clusterNetwork` forms, in run order. */
export const FORMS: readonly ClusterNetworkForm[] = ["conflist", "directory"];

const FORM_NAME: Record<ClusterNetworkForm, string> = {
  conflist: "clusterNetwork as a .conflist path",
  directory: "clusterNetwork as a directory",
};

/** Worst first: the verdict a check gets when the forms disagree. */
const SEVERITY: Verdict[] = ["FAIL", "INFO", "PASS", "SKIP"];

/**
 * One outcome per check from its outcomes per form (same check, `FORMS` order): the same
 * verdict → the first form's outcome; different ones → the worst verdict, with a reason that
 * names each form's verdict (and reason) so the difference is attributed to the form.
 * @param perForm the outcomes of one check, one per form run, with the form.
 * @returns the merged outcome (`ms` summed), with `byForm` set when the verdicts differ.
 */
export function mergeForms(perForm: [ClusterNetworkForm, Outcome][]): Outcome {
  const [first] = perForm;
  const ms = perForm.reduce((a, [, o]) => a + o.ms, 0);
  if (perForm.every(([, o]) => o.verdict === first[1].verdict)) return { ...first[1], ms };
  const worst =
    [...perForm].sort(([, a], [, b]) =>
      SEVERITY.indexOf(a.verdict) - SEVERITY.indexOf(b.verdict)
    )[0][1];
  return {
    check: first[1].check,
    verdict: worst.verdict,
    reason: perForm.map(([f, o]) =>
      `${FORM_NAME[f]}: ${o.verdict}${o.reason ? ` (${o.reason})` : ""}`
    )
      .join("; "),
    ms,
    byForm: Object.fromEntries(perForm.map(([f, o]) => [f, o.verdict])),
  };
}

const USAGE = "usage: deno task conformance --plugin PATH --type NAME [--kube-apiserver PATH] " +
  "[--junit FILE] [--conf-template FILE] [--claims isolation[,…]] [--filter TEXT] " +
  "[--cluster-network both|conflist|directory] " +
  '[--daemon-command "CMD …{{socket}}…{{conf}}…{{kubeconfig}}…" [--daemon-log FILE]]';

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  plugin: string;
  type: string;
  kubeApiServer?: string;
  template?: string;
  claims?: string[];
  /** Only checks whose section or name contains this text (or for which it returns true). */
  filter?: string | ((c: Check) => boolean);
  /** `clusterNetwork` forms to run every check in (default both, {@link FORMS}). */
  forms?: readonly ClusterNetworkForm[];
  /** Called after each check in each form (progress). */
  onOutcome?: (o: Outcome, form: ClusterNetworkForm) => void;
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
  const f = opts.filter;
  const checks = CHECKS.filter((c) =>
    f === undefined || (typeof f === "string" ? `${c.section} ${c.name}`.includes(f) : f(c))
  );
  const perCheck: [ClusterNetworkForm, Outcome][][] = checks.map(() => []);
  try {
    for (const form of opts.forms ?? FORMS) {
      await suite.setClusterNetworkForm(form);
      for (const [i, c] of checks.entries()) {
        const o = await runCheck(c, suite);
        perCheck[i].push([form, o]);
        opts.onOutcome?.(o, form);
      }
    }
  } finally {
    await suite.stop();
  }
  return {
    outcomes: perCheck.map(mergeForms),
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
        "cluster-network": { type: "string", default: "both" },
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
  const cn = values["cluster-network"];
  const forms = cn === "both" ? FORMS : FORMS.filter((f) => f === cn);
  if (forms.length === 0) {
    console.error(`--cluster-network: "${cn}" is not both, conflist or directory\n${USAGE}`);
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
      forms,
      onOutcome: (o, form) =>
        console.error(
          `${o.verdict.padEnd(4)} [${form}] ${o.check.section} ${o.check.name}`,
        ),
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
