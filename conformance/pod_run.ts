/**
 * One pod of one conformance check ({@link PodRun}): its namespace, NADs, pod object and netns
 * on the suite's kube-apiserver and node, and the plugin called for it exactly as a runtime
 * does (env + stdin, `CNI_ARGS` with `K8S_POD_*`). Made by `Suite.pod` (harness.ts), which
 * this module does not import: what a pod needs of its suite is {@link PodHost}.
 *
 * @module
 */

import type { KubeApiServer } from "../tests/support/kube_apiserver.ts";
import type { KubeObject } from "../tests/support/kube_rest.ts";
import { suffix } from "../tests/support/netns.ts";
import {
  k8sArgs,
  type PluginCall,
  type PluginOutcome,
  runPlugin,
} from "../tests/support/plugin.ts";
import type { Recording } from "./recorder.ts";

/** A NAD of a {@link PodRun}: `spec.config` (object or raw text), or none (on-disk lookup). */
export type NadSpec = Record<string, unknown> | string | null;

/** Options of `Suite.pod`: what one check's pod gets. */
export interface PodOptions {
  /** Pod annotations; a function when they name the run's other namespaces. */
  annotations?: Record<string, string> | ((p: PodRun) => Record<string, string>);
  /** NADs in the pod's namespace by name. */
  nads?: Record<string, NadSpec>;
  /** NADs in other namespaces: namespace suffix → name → spec (namespaces are created). */
  otherNads?: Record<string, Record<string, NadSpec>>;
  /** Files written into `confDir` for this pod (name → JSON object); removed afterwards. */
  onDisk?: Record<string, Record<string, unknown>>;
  /** Merged into the plugin config (e.g. the runtime's `runtimeConfig`). */
  conf?: Record<string, unknown>;
  cniVersion?: string;
}

/**
 * What a {@link PodRun} needs of the suite that made it (`Suite` in harness.ts implements it):
 * the API server, the node's directories, the plugin, the config template, and the call tally.
 */
export interface PodHost {
  readonly api: KubeApiServer;
  readonly dirs: { readonly bin: string; readonly conf: string; readonly rec: string };
  readonly opts: { readonly plugin: string };
  /** Plugin calls made so far, by CNI command; a {@link PodRun} counts its own. */
  readonly calls: Record<string, number>;
  /** Wall time spent in plugin calls so far, ms. */
  callMs: number;
  /** The plugin's config from the template, for `cniVersion` (default `"1.0.0"`). */
  config(cniVersion?: string): Record<string, unknown>;
}

/** The pod every check creates, in the check's own namespace. */
export const POD = "conf-pod";
/** The node every check's pod is bound to (`spec.nodeName`; `{{nodeName}}`). */
export const NODE = "conformance-node";

/** One pod of one check. Always {@link PodRun.cleanup} it. */
export class PodRun {
  readonly id = suffix(6);
  readonly ns = `conf-${this.id}`;
  readonly containerId = `conf${this.id}${crypto.randomUUID().replaceAll("-", "")}`;
  readonly netnsName = `mft-conf-${this.id}`;
  readonly netnsPath = `/var/run/netns/mft-conf-${this.id}`;
  uid = "";
  conf: Record<string, unknown> = {};
  #namespaces: string[] = [];
  #files: string[] = [];
  #netns = false;
  #netnsDeleted = false;

  constructor(readonly suite: PodHost, readonly opts: PodOptions) {}

  /** The namespace of `otherNads[key]`. */
  otherNs(key: string): string {
    return `${this.ns}-${key}`;
  }

  /** Creates the namespaces, NADs, on-disk files, pod and netns; builds the config. */
  async init(): Promise<void> {
    const admin = this.suite.api.admin;
    await this.#namespace(this.ns);
    for (const [name, spec] of Object.entries(this.opts.nads ?? {})) {
      await this.#nad(this.ns, name, spec);
    }
    for (const [key, nads] of Object.entries(this.opts.otherNads ?? {})) {
      await this.#namespace(this.otherNs(key));
      for (const [name, spec] of Object.entries(nads)) {
        await this.#nad(this.otherNs(key), name, spec);
      }
    }
    for (const [file, obj] of Object.entries(this.opts.onDisk ?? {})) {
      const path = `${this.suite.dirs.conf}/${file}`;
      await Deno.writeTextFile(path, JSON.stringify(obj));
      this.#files.push(path);
    }
    const a = this.opts.annotations;
    const annotations = typeof a === "function" ? a(this) : a;
    const pod = await admin.createPod(this.ns, POD, { annotations, nodeName: NODE });
    this.uid = pod.metadata.uid as string;
    const r = await new Deno.Command("ip", { args: ["netns", "add", this.netnsName] }).output();
    if (r.code !== 0) throw new Error(`ip netns add: ${new TextDecoder().decode(r.stderr)}`);
    this.#netns = true;
    this.conf = { ...this.suite.config(this.opts.cniVersion), ...this.opts.conf };
  }

  async #namespace(ns: string): Promise<void> {
    await this.suite.api.admin.createNamespace(ns);
    this.#namespaces.push(ns);
  }

  async #nad(ns: string, name: string, spec: NadSpec): Promise<void> {
    await this.suite.api.admin.create({
      apiVersion: "k8s.cni.cncf.io/v1",
      kind: "NetworkAttachmentDefinition",
      metadata: { name, namespace: ns },
      spec: spec === null ? {} : { config: typeof spec === "string" ? spec : JSON.stringify(spec) },
    });
  }

  /** Calls the plugin as a runtime does for this pod; `extra` overrides any field. */
  async call(
    command: PluginCall["command"],
    extra: Partial<PluginCall> = {},
  ): Promise<PluginOutcome> {
    this.suite.calls[command] = (this.suite.calls[command] ?? 0) + 1;
    const out = await runPlugin({
      plugin: this.suite.opts.plugin,
      command,
      config: this.conf,
      containerId: this.containerId,
      netns: this.netnsPath,
      ifName: "eth0",
      args: k8sArgs(this.ns, POD, this.containerId, this.uid),
      path: `${this.suite.dirs.bin}:/usr/lib/cni`,
      ...extra,
    });
    this.suite.callMs += out.ms;
    return out;
  }

  /** What the recorder saw for this pod's container ID, in call order. */
  async records(): Promise<Recording[]> {
    const out: Recording[] = [];
    for await (const e of Deno.readDir(this.suite.dirs.rec)) {
      const r: Recording = JSON.parse(await Deno.readTextFile(`${this.suite.dirs.rec}/${e.name}`));
      if (r.env.CNI_CONTAINERID === this.containerId) out.push(r);
    }
    return out.sort((a, b) => a.t - b.t);
  }

  /** Everything the recorder saw at or after `t` (ms, as `Recording.t`), any container. */
  async recordsSince(t: number): Promise<Recording[]> {
    const out: Recording[] = [];
    for await (const e of Deno.readDir(this.suite.dirs.rec)) {
      const r: Recording = JSON.parse(await Deno.readTextFile(`${this.suite.dirs.rec}/${e.name}`));
      if (r.t >= t) out.push(r);
    }
    return out.sort((a, b) => a.t - b.t);
  }

  /** The pod as the server has it now. */
  pod(): Promise<KubeObject> {
    return this.suite.api.admin.getPod(this.ns, POD);
  }

  /** The pod's network-status annotation parsed; undefined when absent. */
  async status(): Promise<Record<string, unknown>[] | undefined> {
    const text = (await this.pod()).metadata?.annotations?.["k8s.v1.cni.cncf.io/network-status"];
    return text === undefined ? undefined : JSON.parse(text);
  }

  /** Interface names in the pod's netns (`lo` excluded). */
  async links(): Promise<string[]> {
    const r = await new Deno.Command("ip", { args: ["-n", this.netnsName, "-j", "link", "show"] })
      .output();
    const links = JSON.parse(new TextDecoder().decode(r.stdout) || "[]") as { ifname: string }[];
    return links.map((l) => l.ifname).filter((n) => n !== "lo").sort();
  }

  /** The MAC address of `ifname` in the pod's netns; undefined when there is no such link. */
  async mac(ifname: string): Promise<string | undefined> {
    const r = await new Deno.Command("ip", { args: ["-n", this.netnsName, "-j", "link", "show"] })
      .output();
    const links = JSON.parse(new TextDecoder().decode(r.stdout) || "[]") as {
      ifname: string;
      address: string;
    }[];
    return links.find((l) => l.ifname === ifname)?.address;
  }

  /** `ip -j route show` of the pod's netns (IPv4). */
  async routes(): Promise<{ dst: string; gateway?: string; dev: string }[]> {
    const r = await new Deno.Command("ip", { args: ["-n", this.netnsName, "-j", "route", "show"] })
      .output();
    return JSON.parse(new TextDecoder().decode(r.stdout) || "[]");
  }

  /**
   * Deletes the pod's netns as a runtime does when the sandbox is gone (the interfaces in it go
   * with it); {@link cleanup} still calls DEL.
   * @throws Error when `ip netns del` fails
   */
  async deleteNetns(): Promise<void> {
    const r = await new Deno.Command("ip", { args: ["netns", "del", this.netnsName] }).output();
    if (r.code !== 0) throw new Error(`ip netns del: ${new TextDecoder().decode(r.stderr)}`);
    this.#netnsDeleted = true;
  }

  /** Best-effort DEL, then removes netns, on-disk files, pod and namespaces; never throws. */
  async cleanup(): Promise<void> {
    if (this.#netns) {
      await this.call("DEL").catch(() => {});
      if (!this.#netnsDeleted) {
        await new Deno.Command("ip", { args: ["netns", "del", this.netnsName] }).output();
      }
    }
    for (const f of this.#files) await Deno.remove(f).catch(() => {});
    const admin = this.suite.api.admin;
    await admin.delete("v1", "Pod", this.ns, POD).catch(() => {});
    for (const ns of this.#namespaces) {
      await admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
    }
  }
}
