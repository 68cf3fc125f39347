/**
 * The conformance suite's world: a real kube-apiserver (tests/support/kube_apiserver.ts) with
 * the NAD CRD, a scratch node (temp dirs, a host bridge as macvlan master), the recording
 * delegate installed in a temp bin dir, the plugin's config built from a template, and one
 * {@link PodRun} per check: its own namespace, NADs, pod, netns, and the plugin called exactly
 * as a runtime does (env + stdin, `CNI_ARGS` with `K8S_POD_*`).
 *
 * Knows nothing of any plugin's internals: only the CNI interface and the Kubernetes API.
 *
 * `clusterNetwork` forms: the default network's config is named either by its `.conflist`
 * path or by its directory (a plugin then takes the directory's alphabetically first config,
 * as Multus does); {@link Suite.clusterNetworkForm} says which the template's
 * `{{clusterNetwork}}` gets (runConformance runs the checks once per form).
 *
 * Daemon mode (`daemonCommand`, conformance/daemon.ts): a plugin with a resident node daemon
 * (Manifold's `manifold daemon`, Multus thick's `multus-daemon`) gets that daemon started
 * before the first check and stopped with SIGTERM after the last; the config names its socket
 * so every call goes through it.
 *
 * @module
 */

import { parse as parseYaml } from "yaml";
import { type KubeApiServer, startKubeApiServer } from "../tests/support/kube_apiserver.ts";
import { Scratch } from "../tests/support/netns.ts";
import { NODE, POD, type PodHost, type PodOptions, PodRun } from "./pod_run.ts";
import { type DaemonExit, fillCommand, NodeDaemon } from "./daemon.ts";

/** The recording delegate's CNI type. */
export const RECORDER = "conformance-recorder";
/** The cluster-wide default network's name (its conflist is `clusterNetwork`). */
export const DEFAULT_NET = "conformance-default";

const CRD = new URL("../deploy/00-crd.yaml", import.meta.url).pathname;
const RECORDER_TS = new URL("./recorder.ts", import.meta.url).pathname;

/**
 * The default config template: the keys Multus and Manifold share. `{{key}}` is replaced by
 * the suite's value (JSON-escaped): type, cniVersion, kubeconfig, clusterNetwork, cniDir,
 * binDir, confDir, nodeName, and in daemon mode daemonSocket and daemonSocketDir.
 */
export const DEFAULT_TEMPLATE = `{
  "cniVersion": "{{cniVersion}}",
  "name": "conformance",
  "type": "{{type}}",
  "kubeconfig": "{{kubeconfig}}",
  "clusterNetwork": "{{clusterNetwork}}",
  "cniDir": "{{cniDir}}",
  "binDir": "{{binDir}}",
  "confDir": "{{confDir}}",
  "capabilities": { "portMappings": true, "bandwidth": true }
}`;

/**
 * The default template in daemon mode: {@link DEFAULT_TEMPLATE} plus the daemon's socket and
 * `"daemonFallback": false`, so a request the daemon did not serve fails instead of silently
 * running in-process (Manifold's keys; another plugin gives its own with `--conf-template`).
 */
export const DAEMON_TEMPLATE = DEFAULT_TEMPLATE.replace(
  /\n\}$/,
  `,\n  "daemonSocket": "{{daemonSocket}}",\n  "daemonFallback": false\n}`,
);

/** How the template's `{{clusterNetwork}}` names the default network's config. */
export type ClusterNetworkForm = "conflist" | "directory";

/** Options of {@link Suite.start}. */
export interface SuiteOptions {
  plugin: string;
  type: string;
  /** kube-apiserver binary; default `$MANIFOLD_KUBE_APISERVER`. */
  kubeApiServer?: string;
  /** Config template text (see {@link DEFAULT_TEMPLATE}). */
  template?: string;
  /** What the plugin claims beyond the MUSTs (e.g. `isolation`). */
  claims?: string[];
  /**
   * Daemon mode: the node daemon's command line, started before the first check (words split
   * like a shell's, no shell; placeholders `{{socket}}`, `{{socketDir}}`, `{{conf}}` (the
   * plugin config as a file), `{{kubeconfig}}`, `{{nodeName}}`, `{{binDir}}`, `{{cniDir}}`,
   * `{{confDir}}`), ready once its socket accepts a connection, stopped with SIGTERM after the
   * last check.
   */
  daemonCommand?: string;
  /** Where the daemon's stdout and stderr go; default a file removed with the suite. */
  daemonLog?: string;
}

/** The suite's shared state; {@link Suite.stop} it. */
export class Suite implements PodHost {
  readonly scratch = new Scratch();
  api!: KubeApiServer;
  base = "";
  master = "";
  dirs = { bin: "", conf: "", net: "", cni: "", ipam: "", rec: "", kube: "", daemon: "" };
  kubeconfig = "";
  /** The daemon's socket path (daemon mode). */
  daemonSocket = "";
  /** Plugin calls made so far, by CNI command (e.g. `{ ADD: 80, DEL: 95 }`). */
  readonly calls: Record<string, number> = {};
  /** Wall time spent in plugin calls so far, ms (each from spawn to exit). */
  callMs = 0;
  #form: ClusterNetworkForm = "conflist";
  #daemon: NodeDaemon | undefined;
  #daemonStart: (() => Promise<NodeDaemon>) | undefined;
  #daemonExit: DaemonExit | undefined;
  /** The first exit other than 0 of a daemon stopped between the forms. */
  #badExit: DaemonExit | undefined;
  #subnet = 0;

  private constructor(readonly opts: SuiteOptions) {}

  /** Starts the API server, installs the CRD and the recorder, writes the default network. */
  static async start(opts: SuiteOptions): Promise<Suite> {
    const s = new Suite(opts);
    try {
      await s.#init();
    } catch (e) {
      await s.stop();
      throw e;
    }
    return s;
  }

  async #init(): Promise<void> {
    // kube-apiserver sometimes dies in its post-start hooks on a loaded machine
    // ("APF bootstrap ensurer timed out waiting for cache sync"): one more try.
    this.api = await startKubeApiServer({ binary: this.opts.kubeApiServer }).catch((e) => {
      console.error(`kube-apiserver did not start, retrying once: ${String(e).split("\n")[0]}`);
      return startKubeApiServer({ binary: this.opts.kubeApiServer });
    });
    await this.api.admin.installCrd(parseYaml(await Deno.readTextFile(CRD)));
    this.base = await this.scratch.dir("mft-conf-");
    for (const k of Object.keys(this.dirs) as (keyof Suite["dirs"])[]) {
      this.dirs[k] = `${this.base}/${k}`;
      await Deno.mkdir(this.dirs[k], { recursive: true });
    }
    this.master = await this.scratch.bridge("c");
    this.kubeconfig = `${this.dirs.kube}/kubeconfig`;
    await this.api.writeKubeconfig(this.kubeconfig);
    const wrapper = `${this.dirs.bin}/${RECORDER}`;
    await Deno.writeTextFile(
      wrapper,
      `#!/bin/sh\nCONFORMANCE_RECORD_DIR='${this.dirs.rec}' exec '${Deno.execPath()}' run ` +
        `--quiet --no-prompt --no-config --no-lock -A '${RECORDER_TS}'\n`,
      { mode: 0o755 },
    );
    await Deno.writeTextFile(
      `${this.dirs.net}/10-default.conflist`,
      JSON.stringify(this.defaultConflist()),
    );
    if (this.opts.daemonCommand) await this.#startDaemon(this.opts.daemonCommand);
  }

  async #startDaemon(command: string): Promise<void> {
    this.daemonSocket = `${this.dirs.daemon}/run/daemon.sock`;
    await Deno.mkdir(`${this.dirs.daemon}/run`, { mode: 0o700 });
    const conf = `${this.dirs.daemon}/conf.json`;
    await Deno.writeTextFile(conf, JSON.stringify(this.config(), null, 2));
    const argv = fillCommand(command, {
      ...this.#values(),
      socket: this.daemonSocket,
      socketDir: `${this.dirs.daemon}/run`,
      conf,
    });
    this.#daemonStart = () =>
      NodeDaemon.start(argv, {
        socket: this.daemonSocket,
        log: this.opts.daemonLog ?? `${this.dirs.daemon}/daemon.log`,
      });
    this.#daemon = await this.#daemonStart();
  }

  /** How `{{clusterNetwork}}` names the default network now (default `"conflist"`). */
  get clusterNetworkForm(): ClusterNetworkForm {
    return this.#form;
  }

  /**
   * Switches the `{{clusterNetwork}}` form for the checks that follow; in daemon mode the
   * daemon is stopped (SIGTERM) and started again with the new config. A daemon that does not
   * exit 0 here is started again all the same, and its exit is what {@link daemonExit}
   * reports (the run fails at the end, with its table).
   * @throws Error when the daemon does not come back
   */
  async setClusterNetworkForm(form: ClusterNetworkForm): Promise<void> {
    if (form === this.#form) return;
    this.#form = form;
    if (this.#daemon && this.#daemonStart) {
      await Deno.writeTextFile(
        `${this.dirs.daemon}/conf.json`,
        JSON.stringify(this.config(), null, 2),
      );
      const exit = await this.#daemon.stop();
      this.#daemon = undefined;
      if (exit.code !== 0 || exit.killed) this.#badExit ??= exit;
      this.#daemon = await this.#daemonStart();
    }
  }

  /**
   * A default network of one check's own: writes `conflist` as `<dir>/10-default.conflist`
   * (`dir` is created) and returns what the plugin config's `clusterNetwork` names it by in
   * the current form (the file, or `dir`).
   */
  async defaultNetwork(dir: string, conflist: Record<string, unknown>): Promise<string> {
    await Deno.mkdir(dir, { recursive: true });
    const file = `${dir}/10-default.conflist`;
    await Deno.writeTextFile(file, JSON.stringify(conflist));
    return this.#form === "conflist" ? file : dir;
  }

  /** True in daemon mode (`daemonCommand`). */
  get daemonMode(): boolean {
    return this.opts.daemonCommand !== undefined;
  }

  /**
   * Daemon mode: stops the daemon with SIGTERM and starts it again with the same command (a
   * node daemon's rolling update), waiting for its socket.
   * @throws Error when not in daemon mode, when the daemon did not exit 0, or did not come back
   */
  async restartDaemon(): Promise<void> {
    if (!this.#daemon || !this.#daemonStart) throw new Error("no daemon (not in daemon mode)");
    const exit = await this.#daemon.stop();
    this.#daemon = undefined;
    if (exit.code !== 0 || exit.killed) {
      throw new Error(
        `the daemon exited ${exit.code}${exit.killed ? " (SIGKILLed)" : ""} on SIGTERM`,
      );
    }
    this.#daemon = await this.#daemonStart();
  }

  /**
   * How the daemon ended (daemon mode, after {@link stop}): its first exit other than 0 when
   * it was stopped between the `clusterNetwork` forms, else its last; undefined before, or
   * without one.
   */
  get daemonExit(): DaemonExit | undefined {
    return this.#daemonExit;
  }

  /** True when the plugin claims `what` (`--claims`). */
  claims(what: string): boolean {
    return this.opts.claims?.includes(what) ?? false;
  }

  /** The plugin's config from the template. */
  config(cniVersion = "1.0.0"): Record<string, unknown> {
    const values = this.#values(cniVersion);
    const template = this.opts.template ??
      (this.opts.daemonCommand ? DAEMON_TEMPLATE : DEFAULT_TEMPLATE);
    const text = template.replace(
      /\{\{(\w+)\}\}/g,
      (m, k: string) => k in values ? JSON.stringify(values[k]).slice(1, -1) : m,
    );
    return JSON.parse(text);
  }

  /** The placeholder values of templates and the daemon command. */
  #values(cniVersion = "1.0.0"): Record<string, string> {
    return {
      type: this.opts.type,
      cniVersion,
      kubeconfig: this.kubeconfig,
      clusterNetwork: this.#form === "conflist"
        ? `${this.dirs.net}/10-default.conflist`
        : this.dirs.net,
      cniDir: this.dirs.cni,
      binDir: this.dirs.bin,
      confDir: this.dirs.conf,
      nodeName: NODE,
      ...this.daemonSocket
        ? {
          daemonSocket: this.daemonSocket,
          daemonSocketDir: this.daemonSocket.slice(0, this.daemonSocket.lastIndexOf("/")),
        }
        : {},
    };
  }

  /**
   * The cluster default network's conflist: the recorder in front of macvlan on the suite's
   * bridge, host-local IPAM on 10.76.0.0/16 with a default route; `cniVersion` "1.0.0", `name`
   * {@link DEFAULT_NET} and the IPAM `dataDir` unless `opts` says otherwise.
   */
  defaultConflist(
    opts: { cniVersion?: string; name?: string; ipamDir?: string } = {},
  ): Record<string, unknown> {
    return {
      cniVersion: opts.cniVersion ?? "1.0.0",
      name: opts.name ?? DEFAULT_NET,
      plugins: [{
        type: RECORDER,
        delegate: "macvlan",
        master: this.master,
        mode: "bridge",
        ipam: {
          type: "host-local",
          dataDir: opts.ipamDir ?? this.dirs.ipam,
          ranges: [[{ subnet: "10.76.0.0/16", gateway: "10.76.0.1" }]],
          routes: [{ dst: "0.0.0.0/0" }],
        },
        capabilities: { portMappings: true, bandwidth: true },
      }],
    };
  }

  /**
   * A secondary network's config: the recorder in front of macvlan on the suite's bridge with
   * host-local IPAM on a fresh /24 (10.77.x.0/24); `extra` is merged in.
   */
  net(extra: Record<string, unknown> = {}): Record<string, unknown> {
    const n = ++this.#subnet % 250;
    return {
      cniVersion: "1.0.0",
      type: RECORDER,
      delegate: "macvlan",
      master: this.master,
      mode: "bridge",
      ipam: {
        type: "host-local",
        dataDir: this.dirs.ipam,
        ranges: [[{ subnet: `10.77.${n}.0/24`, gateway: `10.77.${n}.1` }]],
      },
      ...extra,
    };
  }

  /** Creates a namespace, its NADs and the pod, a netns, and the call helper. */
  async pod(opts: PodOptions = {}): Promise<PodRun> {
    const run = new PodRun(this, opts);
    try {
      await run.init();
    } catch (e) {
      await run.cleanup();
      throw e;
    }
    return run;
  }

  /** Stops the daemon (SIGTERM) and the server, removes everything; never throws. */
  async stop(): Promise<void> {
    if (this.#daemon) this.#daemonExit = await this.#daemon.stop();
    this.#daemonExit = this.#badExit ?? this.#daemonExit;
    await this.api?.stop().catch(() => {});
    await this.scratch.cleanup();
  }
}

export { NODE, POD, PodRun };
export type { NadSpec, PodOptions } from "./pod_run.ts";
