/**
 * `manifold controller`: the KEP-3698 PodNetwork controller (deploy/50-controller.yaml, one
 * replica per cluster): sets `ParamsReady`/`Ready` on PodNetworks and PodNetworkAttachments of
 * Manifold's provider, keeps their InUse finalizer and the "default" PodNetwork (lib/kep).
 * Runs until SIGTERM/SIGINT.
 *
 * Exit codes: 0 stopped by a signal, 1 failure (no API connection, unusable kubeconfig),
 * 2 usage error.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { outputs, stopSignal, type TextOutputs } from "./io.ts";
import { KubeClient } from "../k8s/client.ts";
import { inClusterConnection } from "../k8s/connection.ts";
import { loadKubeconfig } from "../k8s/kubeconfig/load.ts";
import { type ControllerOptions, runController as runLoop } from "../kep/controller.ts";
import { createLogger, type Logger } from "../log/mod.ts";
import { DEFAULT_PODNETWORK_PROVIDER } from "../multinet/config.ts";
import { errorText } from "../util/text.ts";

/** Usage text of `manifold controller`. */
export const CONTROLLER_USAGE = `Usage: manifold controller [options]

The KEP-3698 PodNetwork controller: sets the Ready and ParamsReady conditions of PodNetworks
and PodNetworkAttachments of this provider, keeps their InUse finalizer while a pod or
PodNetworkAttachment references them, and creates the "default" PodNetwork (the cluster
default network) and recreates it when deleted. One replica per cluster.

Options:
  --kubeconfig PATH          kubeconfig (default: the pod's service account, in-cluster)
  --provider NAME            PodNetwork spec.provider handled (default ${DEFAULT_PODNETWORK_PROVIDER})
  --namespace-isolation      NADs must be in a global namespace (as the plugins' namespaceIsolation)
  --global-namespaces LIST   comma-separated global namespaces ("default" always included)
  --no-default-podnetwork    do not create the "default" PodNetwork (the KEP's
                             disable-default-podnetwork-creation; the operator creates it)
  --log-level LEVEL          debug, verbose (default), error, panic
  -h, --help                 this text

Exit codes: 0 stopped by a signal, 1 failure, 2 usage error.
`;

/** Injected I/O of {@link runControllerCli}; defaults are the process's. */
export interface ControllerIO extends TextOutputs {
  /** Environment (`KUBERNETES_SERVICE_HOST`/`PORT` for the in-cluster connection). */
  env?: Record<string, string>;
  /** Stops the controller; default: SIGTERM and SIGINT of the process. */
  signal?: AbortSignal;
  /** Receives the log; default JSON lines on stderr at `--log-level`. */
  logger?: Logger;
  /** Loop timing (tests). */
  timing?: Pick<ControllerOptions, "debounceMs" | "resyncMs" | "timing" | "onPass">;
}

/**
 * `manifold controller …`: parses the flags, connects, runs until a signal. Never throws.
 * @param args the words after `controller`
 * @param io stdout, stderr, env, stop signal, logger
 * @returns 0 stopped, 1 failure, 2 usage error
 */
export async function runControllerCli(args: string[], io: ControllerIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse(args).values;
    if (values.help) {
      stdout(CONTROLLER_USAGE);
      return 0;
    }
    const level = values["log-level"] ?? "verbose";
    if (!["debug", "verbose", "info", "warning", "error", "panic"].includes(level)) {
      throw new Error(`--log-level must be debug, verbose, error or panic, got ${level}`);
    }
    if (values.kubeconfig === "") throw new Error("--kubeconfig must not be empty");
  } catch (e) {
    stderr(`manifold controller: ${errorText(e)}\nTry 'manifold controller --help'.\n`);
    return 2;
  }
  const logger = io.logger ??
    createLogger({ level: values["log-level"] ?? "verbose", toStderr: true }).with({
      cmd: "controller",
    });
  const global = (values["global-namespaces"] ?? "").split(",").map((s) => s.trim()).filter(
    Boolean,
  );
  const { signal, release } = stopSignal(io.signal);
  let kube: KubeClient | undefined;
  try {
    const connection = values.kubeconfig
      ? await loadKubeconfig(values.kubeconfig)
      : inClusterConnection(io.env ?? Deno.env.toObject());
    if (!connection) {
      throw new Error(
        "no API server: pass --kubeconfig, or run in a pod (KUBERNETES_SERVICE_HOST/PORT)",
      );
    }
    kube = new KubeClient({ connection, logger, userAgent: "manifold-controller", signal });
    const policy = {
      provider: values.provider ?? DEFAULT_PODNETWORK_PROVIDER,
      namespaceIsolation: values["namespace-isolation"] ?? false,
      globalNamespaces: global.includes("default") ? global : ["default", ...global],
      createDefault: !values["no-default-podnetwork"],
    };
    logger.info("controller starting", { server: connection.server, ...policy });
    await runLoop(kube, { ...io.timing, signal, logger, policy });
    logger.info("controller stopped");
    return 0;
  } catch (e) {
    logger.error("controller failed", { error: errorText(e) });
    stderr(`manifold controller: ${errorText(e)}\n`);
    return 1;
  } finally {
    kube?.close();
    release();
  }
}

function parse(args: string[]) {
  return parseArgs({
    args,
    options: {
      kubeconfig: { type: "string" },
      provider: { type: "string" },
      "namespace-isolation": { type: "boolean" },
      "global-namespaces": { type: "string" },
      "no-default-podnetwork": { type: "boolean" },
      "log-level": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
}
