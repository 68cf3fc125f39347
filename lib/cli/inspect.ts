/**
 * `manifold inspect`: the attachments of a sandbox as the kernel sees them — a table for
 * people, JSON (`--json`) for tools.
 *
 * - `--netns <path|name>`: every interface of the network namespace, by ifindex (no cache).
 * - `--pod ns/name [--cni-dir DIR]`: the newest live (non-tombstone) cache record of the pod
 *   gives the sandbox's netns and its attachments, in ADD order; each shows the kernel's
 *   MAC/GUID, MTU, oper state, kind and addresses, and what the delegate claimed but the
 *   kernel does not hold ({@link reconcileStatus}, NPWG v1.3 §5.3.2–§5.3.5), and the
 *   device-info ADD reported for it (NPWG v1.3 §5.3.8: a DEVICE column when some attachment
 *   has one; JSON `deviceInfo`).
 *
 * Both show the main table's default routes (`0.0.0.0/0`, `::/0`) and, with `--pod`, the
 * recorded `default-route` change (NPWG v1.3 §4.1.2.1.9). Link-local addresses
 * (`fe80::/10`, `169.254.0.0/16`) are left out of `addresses` and of the table, as in
 * network-status; JSON lists them apart in `linkLocalAddresses`.
 *
 * Exit codes: 0 shown (even with problems), 1 pod or netns not found or not enterable,
 * 2 usage error.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { parseArgs } from "node:util";
import { AttachmentCache, type CacheRecord, DEFAULT_CNI_DIR } from "../multinet/mod.ts";
import { inspectNetns, type NetnsSnapshot, resolveNetnsPath } from "../netlink/mod.ts";
import { errorText, printable } from "../util/text.ts";
import { outputs, processEnv, type TextOutputs, warningLogger } from "./io.ts";
import {
  formatOutput,
  KUBE_FLAG_OPTIONS,
  type KubeFlags,
  kubeFlags,
  kubeFlagsHelp,
  livePod,
  OUTPUT_FLAG_OPTIONS,
  type OutputFormat,
  outputFormat,
  podArgument,
  withKubectlDefaults,
} from "./kube_flags.ts";
import { formatInspectJson, formatInspectTable } from "./inspect_format.ts";
import {
  buildInspectReport,
  type InspectReport,
  newestFirst,
  sandboxOf,
} from "./inspect_report.ts";
import type { Logger } from "../log/mod.ts";

/** Usage text of `manifold inspect` (printed by `--help` and after a usage error hint). */
export const INSPECT_USAGE = `Usage:
  manifold inspect --netns <path|name> [--rules] [-o json|yaml]
  manifold inspect POD [-n NAMESPACE] [--cni-dir DIR] [--kubeconfig PATH] [--context NAME]
                   [--rules] [-o json|yaml]             (also --pod <namespace/name>)

Prints the attachments of a sandbox as the kernel sees them.

Options:
  --netns <path|name>  a network namespace: a path (/proc/<pid>/ns/net, /var/run/netns/x)
                       or a name under /var/run/netns; shows every interface
  POD, --pod <ns/name> the pod's newest sandbox in the cache; shows its attachments and
                       what each delegate claimed but the kernel does not hold
  -n, --namespace NS   the pod's namespace (default "default")
  --cni-dir DIR        the cache directory (default: $MANIFOLD_CNI_DIR, else ${DEFAULT_CNI_DIR})
${
  kubeFlagsHelp("no API", 23)
}                       with a kubeconfig, --pod shows the sandbox of the live pod (its UID)
  --rules              also the MultiNetworkPolicy rules in force in the namespace (the
                       nftables table inet manifold_mnp, read through libnftables)
  -o, --output FORMAT  json or yaml for tools instead of a table (--json = -o json)
  -h, --help           this text

Link-local addresses are left out of the table (JSON: "linkLocalAddresses").
Exit codes: 0 shown, 1 pod or netns not found or not enterable, 2 usage error.
`;

/** Injected I/O of {@link runInspect}; defaults are the process's stdout, stderr and env. */
export interface InspectIO extends TextOutputs {
  /** Environment; `MANIFOLD_CNI_DIR` is the default of `--cni-dir`. */
  env?: Record<string, string>;
}

/**
 * `manifold inspect …`: parses `args` (the words after `inspect`), reads the kernel (and the
 * cache for `--pod`), prints the report. Never throws and never prints a stack trace.
 *
 * @param args e.g. `["--netns", "pod1", "--json"]`, `["--pod", "default/web"]`
 * @param io stdout, stderr, env (default: the process's)
 * @returns the exit code: 0 shown (problems included), 1 pod or netns not found or cannot
 *   be entered (message on stderr), 2 usage error (`--help` prints usage and returns 0)
 */
export async function runInspect(args: string[], io: InspectIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let opts: InspectOptions;
  try {
    opts = parseInspectArgs(args, io.env ?? processEnv());
  } catch (e) {
    stderr(`manifold inspect: ${printable(errorText(e))}\nTry 'manifold inspect --help'.\n`);
    return 2;
  }
  if (opts.help) {
    stdout(INSPECT_USAGE);
    return 0;
  }
  // Warnings (the libmnl fallback, a damaged cache record) as lines on stderr.
  const logger = warningLogger((msg, fields) => {
    const extra = fields && Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : "";
    stderr(`manifold inspect: warning: ${printable(msg + extra)}\n`);
  });
  let outcome: InspectReport | InspectFailure;
  try {
    outcome = opts.netns !== undefined
      ? inspectNetnsReport(opts.netns, logger)
      : await inspectPodReport(opts.pod!, opts.cniDir, logger, {
        flags: opts.kube ?? {},
        env: io.env ?? processEnv(),
      });
  } catch (e) {
    outcome = { failure: errorText(e) };
  }
  if ("failure" in outcome) {
    stderr(`manifold inspect: ${printable(outcome.failure)}\n`);
    return 1;
  }
  const report = outcome;
  const rules = opts.rules
    ? await (await lazyImport<typeof import("./inspect_rules.ts")>(
      "./inspect_rules.ts",
      import.meta.url,
    )).policyRules(outcome.netns)
    : undefined;
  const json = () => formatInspectJson(rules ? { ...report, ...rules.json } : report);
  stdout(
    opts.format === "text"
      ? formatInspectTable(report) + (rules?.text ?? "")
      : opts.format === "json"
      ? json()
      : await formatOutput("yaml", JSON.parse(json()), () => ""),
  );
  return 0;
}

/** Why a report could not be made (exit code 1): one sentence for stderr. */
interface InspectFailure {
  failure: string;
}

/** `--netns`: every interface of the namespace at `netns` (a path or a name). */
function inspectNetnsReport(netns: string, logger: Logger): InspectReport | InspectFailure {
  const path = resolveNetnsPath(netns);
  let snapshot: NetnsSnapshot;
  try {
    snapshot = inspectNetns(path, { logger });
  } catch (e) {
    return { failure: netnsFailure(e, path) };
  }
  return buildInspectReport(snapshot, { netns: path });
}

/** `--pod`: the newest live sandbox of the pod in the cache, against its namespace. */
async function inspectPodReport(
  pod: { namespace: string; name: string },
  cniDir: string,
  logger: Logger,
  kube: { flags: KubeFlags; env: Record<string, string> },
): Promise<InspectReport | InspectFailure> {
  const who = `${pod.namespace}/${pod.name}`;
  const found = await findPodSandboxes(cniDir, pod.namespace, pod.name, logger);
  if (found.length === 0) return { failure: `no sandbox of pod ${who} in the cache at ${cniDir}` };
  // With a kubeconfig, the live pod's sandbox (by UID), not an earlier pod of the same name.
  const live = await livePod(pod, {
    ...kube,
    warn: (e) => logger.warn(`KUBECONFIG not used: ${errorText(e)}`),
  });
  const sandboxes = live ? found.filter((r) => r.pod.uid === live.uid) : found;
  if (sandboxes.length === 0) {
    const node = live!.nodeName ? `, node ${live!.nodeName}` : "";
    return {
      failure: `no sandbox of the live pod ${who} (uid ${live!.uid}${node}) in the cache at ` +
        `${cniDir}; ${found.length} belong to an earlier pod of that name`,
    };
  }
  const [record, ...older] = sandboxes;
  if (record.netns === "") {
    return {
      failure: `sandbox ${record.containerId} of pod ${who} has no network namespace recorded`,
    };
  }
  let snapshot: NetnsSnapshot;
  try {
    snapshot = inspectNetns(record.netns, { logger });
  } catch (e) {
    return {
      failure: `${netnsFailure(e, record.netns)} (sandbox ${record.containerId} of pod ${who})`,
    };
  }
  return buildInspectReport(snapshot, {
    record,
    netns: record.netns,
    otherSandboxes: older.map(sandboxOf),
  });
}

interface InspectOptions {
  help: boolean;
  /** `-o json|yaml` (`--json`), else the table. */
  format: OutputFormat;
  /** `--rules`: also the MultiNetworkPolicy table in force. */
  rules?: boolean;
  netns?: string;
  pod?: { namespace: string; name: string };
  cniDir: string;
  kube?: KubeFlags;
}

/** Parses and validates the flags; throws an Error whose message is the usage problem. */
function parseInspectArgs(args: string[], env: Record<string, string>): InspectOptions {
  const { values, positionals } = parseArgs({
    args,
    options: {
      netns: { type: "string" },
      pod: { type: "string" },
      namespace: { type: "string", short: "n" },
      "cni-dir": { type: "string" },
      ...KUBE_FLAG_OPTIONS,
      ...OUTPUT_FLAG_OPTIONS,
      rules: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: true,
  });
  const help = values.help === true;
  const cniDir = values["cni-dir"] ?? (env.MANIFOLD_CNI_DIR || DEFAULT_CNI_DIR);
  if (help) return { help, format: "text", cniDir };
  const format = outputFormat(values);
  if (values.pod !== undefined && values.namespace !== undefined) {
    throw new Error("--pod cannot be used with -n/--namespace: give POD -n NAMESPACE");
  }
  const pod = podArgument(positionals, values.namespace, values.pod);
  if (values.netns !== undefined && pod !== undefined) {
    throw new Error("--netns and a pod cannot be used together");
  }
  if (values.namespace !== undefined && pod === undefined) {
    throw new Error("-n/--namespace goes with a pod name: POD -n NAMESPACE");
  }
  if (values.netns !== undefined) {
    if (values.netns.trim() === "") throw new Error("--netns needs a path or a name");
    if (values["cni-dir"] !== undefined) throw new Error("--cni-dir only goes with --pod");
    for (const k of ["kubeconfig", "context"] as const) {
      if (values[k] !== undefined) throw new Error(`--${k} only goes with --pod`);
    }
    return { help, format, cniDir, netns: values.netns, rules: values.rules };
  }
  if (pod !== undefined) {
    if (cniDir === "") throw new Error("--cni-dir must not be empty");
    const kube = withKubectlDefaults(kubeFlags(values), env);
    return { help, format, cniDir, pod, kube, rules: values.rules };
  }
  throw new Error("one of --netns or a pod (POD -n NAMESPACE, or --pod) is required");
}

/**
 * The pod's live (non-tombstone) cache records, newest `createdAt` first, ties by
 * containerId. Unreadable or damaged records are skipped with a warning.
 */
async function findPodSandboxes(
  cniDir: string,
  namespace: string,
  name: string,
  logger: Logger,
): Promise<CacheRecord[]> {
  const cache = new AttachmentCache(cniDir);
  const found: CacheRecord[] = [];
  for (const { containerId: id, ifName } of await cache.list()) {
    let record: CacheRecord | undefined;
    try {
      record = await cache.read(id, ifName);
    } catch (e) {
      logger.warn(`skipping cache record ${id}: ${errorText(e)}`);
      continue;
    }
    if (!record || record.deletedAt !== undefined) continue;
    if (record.pod.namespace === namespace && record.pod.name === name) found.push(record);
  }
  return found.sort(newestFirst);
}

/** NetnsError already says "Cannot open network namespace <path>: ENOENT"; others get context. */
function netnsFailure(e: unknown, path: string): string {
  if (e instanceof Error && e.name === "NetnsError") return e.message;
  return `Cannot inspect network namespace ${path}: ${errorText(e)}`;
}
