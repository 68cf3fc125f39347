/**
 * `manifold doctor`: checks a node's Manifold setup and prints a readable report, one
 * `ok` / `warn` / `FAIL` line per check, with a hint for each problem:
 *
 * - binary: `<cni-bin-dir>/manifold` exists and is executable;
 * - config: `00-manifold.conflist` exists, parses as Manifold's configuration, is private
 *   (0600) and is the runtime's choice (lexically first config of the directory);
 * - primary: the cluster default network's config exists and parses; its plugins are in
 *   the bin directory;
 * - kubeconfig: readable, and its token file readable and not empty;
 * - api: reachable, and the service account may get pods, patch pods/status, create events
 *   and list NetworkAttachmentDefinitions — probed without changing anything (a pod name
 *   that does not exist, `dryRun=All`, an event the server must reject after authorisation);
 * - netlink: a netlink socket opens in this network namespace, through libmnl;
 * - readiness: the readiness indicator file, when configured, exists;
 * - cache: the cache directory's records are readable (damaged, unfinished, leftover
 *   temporary files);
 * - daemon (when the config names a `daemonSocket`): the socket is present, private (0600,
 *   root, directory 0700) and answers VERSION with the binary's version (doctor_daemon.ts).
 *
 * Exit codes: 0 no failure (warnings allowed), 1 some check failed, 2 usage error.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { outputs, type TextOutputs } from "./io.ts";
import {
  formatOutput,
  KUBE_FLAG_OPTIONS,
  kubeFlags,
  kubeFlagsHelp,
  OUTPUT_FLAG_OPTIONS,
  type OutputFormat,
  outputFormat,
  withKubectlDefaults,
} from "./kube_flags.ts";
import { INSTALL_DEFAULTS, MANIFOLD_CONFIG_NAME, underRoot } from "../install/mod.ts";
import { errorText, oneLine, printable } from "../util/text.ts";
import {
  binaryStep,
  cacheStep,
  type CheckStatus,
  configStep,
  type DoctorContext,
  type DoctorOptions,
  type DoctorReport,
  type DoctorStep,
  netlinkStep,
  primaryStep,
  readinessStep,
} from "./doctor_checks.ts";
import { apiStep, kubeconfigStep } from "./doctor_api.ts";
import { daemonStep } from "./doctor_daemon.ts";

// explain.ts loads kubeconfigs as the doctor does, through this module.
export { loadKubeconfigUnder } from "./doctor_api.ts";

/** Usage text of `manifold doctor`. */
export const DOCTOR_USAGE = `Usage: manifold doctor [options]

Checks this node's Manifold setup: binary, config, primary config, kubeconfig and API
permissions, netlink (libmnl), readiness file, cache directory, and the daemon (socket,
answer, version) when the config names a daemonSocket.

Options:
  --host-root DIR        where the host's file system is mounted (default /)
  --cni-conf-dir DIR     host CNI config directory (default ${INSTALL_DEFAULTS.cniConfDir})
  --cni-bin-dir DIR      host CNI binary directory (default ${INSTALL_DEFAULTS.cniBinDir})
  --config PATH          Manifold's config (default <cni-conf-dir>/${MANIFOLD_CONFIG_NAME});
                         --config-name NAME (a file of --cni-conf-dir) is its old spelling
  --libmnl PATH          libmnl to load (default libmnl.so.0)
  --api-timeout-ms MS    bound on each API request and the daemon probe (default 3000)
${
  kubeFlagsHelp("Manifold's kubeconfig")
}  -o, --output FORMAT    the report as json or yaml (--json = -o json)
  -h, --help             this text

Exit codes: 0 no failure (warnings allowed), 1 a check failed, 2 usage error.
`;

/** The doctor's steps, in report order (see the module documentation). */
export const DOCTOR_STEPS: readonly DoctorStep[] = [
  binaryStep,
  configStep,
  primaryStep,
  kubeconfigStep,
  apiStep,
  netlinkStep,
  readinessStep,
  cacheStep,
  daemonStep,
];

/**
 * Runs every step of {@link DOCTOR_STEPS} in order. Never throws: an unexpected error of a
 * step becomes a failed check under the step's name.
 *
 * @param options host root, directories, libmnl path, API timeout
 * @returns the report, checks in the order of the module documentation
 */
export async function runDoctorChecks(options: DoctorOptions = {}): Promise<DoctorReport> {
  const hostRoot = options.hostRoot ?? "/";
  const checks: DoctorReport["checks"] = [];
  const ctx: DoctorContext = {
    options,
    hostRoot,
    host: (p) => underRoot(hostRoot, p),
    confDir: (options.cniConfDir ?? INSTALL_DEFAULTS.cniConfDir).replace(/\/+$/, ""),
    binDir: (options.cniBinDir ?? INSTALL_DEFAULTS.cniBinDir).replace(/\/+$/, ""),
    configName: options.configName ?? MANIFOLD_CONFIG_NAME,
    add: (name, status, message, hint) =>
      void checks.push({ name, status, message, ...(hint ? { hint } : {}) }),
  };
  for (const step of DOCTOR_STEPS) {
    try {
      await step.run(ctx);
    } catch (e) {
      ctx.add(step.name, "fail", `unexpected error: ${oneLine(errorText(e))}`);
    }
  }
  return { hostRoot, checks };
}

/**
 * Formats the report for people: a header, one line per check (`ok`, `warn`, `FAIL`,
 * aligned names), hints indented below, and a summary line. Pure.
 *
 * @param report from {@link runDoctorChecks}
 * @returns the text, ending with a newline
 * @example
 * ```ts
 * formatDoctorReport({ hostRoot: "/", checks: [{ name: "binary", status: "ok", message: "x" }] });
 * // "Manifold doctor (host root /)\n  ok    binary  x\n\n1 ok, 0 warnings, 0 failures\n"
 * ```
 */
export function formatDoctorReport(report: DoctorReport): string {
  const width = Math.max(0, ...report.checks.map((c) => c.name.length));
  const lines = [`Manifold doctor (host root ${report.hostRoot})`];
  for (const c of report.checks) {
    const label = c.status === "fail" ? "FAIL" : c.status;
    lines.push(`  ${label.padEnd(4)}  ${c.name.padEnd(width)}  ${printable(c.message)}`.trimEnd());
    if (c.hint && c.status !== "ok") lines.push(`  ${" ".repeat(6 + width)}  hint: ${c.hint}`);
  }
  const count = (s: CheckStatus) => report.checks.filter((c) => c.status === s).length;
  const n = (k: number, word: string) => `${k} ${word}${k === 1 ? "" : "s"}`;
  lines.push(
    "",
    `${count("ok")} ok, ${n(count("warn"), "warning")}, ${n(count("fail"), "failure")}`,
  );
  return lines.join("\n") + "\n";
}

/** Injected I/O of {@link runDoctor}. */
export interface DoctorIO extends TextOutputs {
  /** Environment (`KUBECONFIG`); default the process's. */
  env?: Record<string, string>;
}

/**
 * `manifold doctor …`: parses the flags, runs the checks, prints the report.
 *
 * @param args the words after `doctor`
 * @param io stdout and stderr (default: the process's)
 * @returns 0 no failure, 1 a check failed, 2 usage error
 */
export async function runDoctor(args: string[], io: DoctorIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let values;
  let format: OutputFormat = "text";
  try {
    ({ values } = parseArgs({
      args,
      options: {
        "host-root": { type: "string" },
        "cni-conf-dir": { type: "string" },
        "cni-bin-dir": { type: "string" },
        config: { type: "string" },
        "config-name": { type: "string" },
        libmnl: { type: "string" },
        "api-timeout-ms": { type: "string" },
        ...KUBE_FLAG_OPTIONS,
        ...OUTPUT_FLAG_OPTIONS,
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
    format = outputFormat(values);
    if (values.config !== undefined) {
      if (values["config-name"] !== undefined || values["cni-conf-dir"] !== undefined) {
        throw new Error("--config cannot be used with --config-name or --cni-conf-dir");
      }
      if (!values.config.startsWith("/") || values.config.endsWith("/")) {
        throw new Error("--config must be an absolute path to a file");
      }
      const cut = values.config.lastIndexOf("/");
      values["cni-conf-dir"] = values.config.slice(0, cut) || "/";
      values["config-name"] = values.config.slice(cut + 1);
    } else if (values["config-name"] !== undefined) {
      stderr("manifold doctor: --config-name is deprecated; use --config PATH\n");
    }
    for (const k of ["host-root", "cni-conf-dir", "cni-bin-dir"] as const) {
      const v = values[k];
      if (v !== undefined && !v.startsWith("/")) throw new Error(`--${k} must be an absolute path`);
    }
    const t = values["api-timeout-ms"];
    if (t !== undefined && !/^[1-9]\d{0,5}$/.test(t)) {
      throw new Error("--api-timeout-ms must be an integer between 1 and 999999");
    }
    kubeFlags(values); // usage errors now, before any check runs
  } catch (e) {
    stderr(`manifold doctor: ${oneLine(errorText(e))}\nTry 'manifold doctor --help'.\n`);
    return 2;
  }
  if (values.help) {
    stdout(DOCTOR_USAGE);
    return 0;
  }
  const report = await runDoctorChecks({
    hostRoot: values["host-root"],
    cniConfDir: values["cni-conf-dir"],
    cniBinDir: values["cni-bin-dir"],
    configName: values["config-name"],
    libmnlPath: values.libmnl,
    apiTimeoutMs: values["api-timeout-ms"] ? Number(values["api-timeout-ms"]) : undefined,
    kube: {
      flags: withKubectlDefaults(kubeFlags(values), io.env ?? Deno.env.toObject()),
      env: io.env ?? Deno.env.toObject(),
    },
  });
  stdout(await formatOutput(format, report, () => formatDoctorReport(report)));
  return report.checks.some((c) => c.status === "fail") ? 1 : 0;
}
