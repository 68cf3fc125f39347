/**
 * One pod of one conformance check ({@link PodRun}): its namespace, NADs, pod object and netns
 * on the suite's kube-apiserver and node, and the plugin called for it exactly as a runtime
 * does (env + stdin, `CNI_ARGS` with `K8S_POD_*`). Made by `Suite.pod` (harness.ts).
 *
 * @module
 */

import type { KubeObject } from "../tests/support/kube_rest.ts";
import { suffix } from "../tests/support/netns.ts";
import {
  k8sArgs,
  type PluginCall,
  type PluginOutcome,
  runPlugin,
} from "../tests/support/plugin.ts";
import type { Recording } from "./recorder.ts";
import type { NadSpec, PodOptions, Suite } from "./harness.ts";

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

  constructor(readonly suite: Suite, readonly opts: PodOptions) {}

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
    const config = extra.config ?? this.conf;
    if (command !== "VERSION" && typeof config === "object") await this.suite.installConf(config);
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

  /** Best-effort DEL, then removes netns, on-disk files, pod and namespaces; never throws. */
  async cleanup(): Promise<void> {
    if (this.#netns) {
      await this.call("DEL").catch(() => {});
      await new Deno.Command("ip", { args: ["netns", "del", this.netnsName] }).output();
    }
    for (const f of this.#files) await Deno.remove(f).catch(() => {});
    const admin = this.suite.api.admin;
    await admin.delete("v1", "Pod", this.ns, POD).catch(() => {});
    for (const ns of this.#namespaces) {
      await admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
    }
  }
}
