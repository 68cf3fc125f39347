/**
 * The pods of the whole cluster as the policy agent keeps them: each pod of a list page or
 * watch event is decoded at once into the engine's compact {@link PodInfo} (lib/policy/types.ts
 * `parsePod` of the {@link trimPod} cut) and the API object is dropped, so neither a list of
 * every pod of the cluster nor the store ever holds API objects. Strings that repeat across
 * pods (namespaces, node names, label keys and values, network and interface names) and whole
 * label maps (a Deployment's replicas share theirs) are interned ({@link Interner}); a pod of
 * another node keeps only what makes it a peer (labels, secondary-network addresses): named
 * ports are resolved on the selected, local pod only, and peers are looked up on the local
 * pod's secondary networks.
 *
 * Measured with scripts/scale_policy.ts (20,000 pods of a real kube-apiserver): see
 * docs/performance.md.
 *
 * @module
 */

import { KubeError, type ListWatchResource } from "../../k8s/mod.ts";
import { parsePod, type PodInfo } from "../../policy/types.ts";
import { errorText } from "../../util/text.ts";
import { isPlainObject } from "../../cni/types.ts";
import { trimPod } from "./watch.ts";

/** One pod as the policy agent's pod list+watch delivers it. */
export interface PolicyPod {
  /** `metadata.namespace`. */
  namespace: string;
  /** `metadata.name`. */
  name: string;
  /** `metadata.resourceVersion` (the watch resumes from the last one). */
  resourceVersion?: string;
  /** What the engine reads; undefined when the pod cannot be decoded (see `error`). */
  pod?: PodInfo;
  /** Why `pod` is undefined (e.g. a label value that is not a string): treated as absent. */
  error?: string;
}

/** Entries an {@link Interner} holds before it starts afresh (default). */
export const DEFAULT_INTERN_LIMIT = 100_000;

/**
 * Shares equal strings and equal label maps between pods. Bounded: a table that reaches its
 * limit is emptied and filled again (objects interned before keep their copies: interning
 * only saves memory, it never changes a value), so label values unique to each pod (a
 * StatefulSet's pod name) cannot grow it without end.
 */
export class Interner {
  #strings = new Map<string, string>();
  #labels = new Map<string, Readonly<Record<string, string>>>();
  readonly #limit: number;

  /** @param limit entries per table before it is emptied; default {@link DEFAULT_INTERN_LIMIT} */
  constructor(limit = DEFAULT_INTERN_LIMIT) {
    this.#limit = limit;
  }

  /** Entries held (strings + label maps), for tests. */
  get size(): number {
    return this.#strings.size + this.#labels.size;
  }

  /**
   * The held string equal to `s`, or `s` (now held).
   * @example new Interner().string("a") // "a"
   */
  string(s: string): string {
    const held = this.#strings.get(s);
    if (held !== undefined) return held;
    if (this.#strings.size >= this.#limit) this.#strings = new Map();
    this.#strings.set(s, s);
    return s;
  }

  /**
   * A frozen label map equal to `labels` (same keys and values; key order sorted), shared with
   * every other pod with the same labels.
   */
  labels(labels: Record<string, string>): Readonly<Record<string, string>> {
    const keys = Object.keys(labels).sort();
    if (keys.length === 0) return EMPTY_LABELS;
    let id = "";
    for (const k of keys) id += `${k}\0${labels[k]}\0`;
    const held = this.#labels.get(id);
    if (held) return held;
    const out: Record<string, string> = {};
    for (const k of keys) out[this.string(k)] = this.string(labels[k]);
    Object.freeze(out);
    if (this.#labels.size >= this.#limit) this.#labels = new Map();
    this.#labels.set(id, out);
    return out;
  }
}

const EMPTY_LABELS: Readonly<Record<string, string>> = Object.freeze({});
const NO_PORTS: PodInfo["ports"] = Object.freeze([]) as unknown as PodInfo["ports"];

/**
 * Cuts a parsed pod down to one compact object with interned strings (see the module doc).
 * A pod of another node (`local: false`) enters this node's rules only as a peer, through its
 * addresses on secondary networks: it keeps no named ports, no default-network attachment and
 * no uid (kept when its network-status is unreadable: the Warning event names it).
 *
 * @param pod from `parsePod`
 * @param local whether it runs on this node (or may: the agent has no node name)
 * @param intern the shared tables
 * @returns a new object; `pod` is not changed
 */
export function compactPod(pod: PodInfo, local: boolean, intern: Interner): PodInfo {
  const attachments = local ? pod.attachments : pod.attachments?.filter((a) => !a.isDefault);
  const out: PodInfo = {
    namespace: intern.string(pod.namespace),
    name: pod.name,
    uid: local || !pod.attachments ? pod.uid : undefined,
    nodeName: pod.nodeName === undefined ? undefined : intern.string(pod.nodeName),
    labels: intern.labels(pod.labels) as Record<string, string>,
    ports: local && pod.ports.length ? pod.ports : NO_PORTS,
    attachments: attachments?.map((a) => ({
      network: intern.string(a.network),
      ifName: intern.string(a.ifName),
      ips: a.ips,
      isDefault: a.isDefault,
    })) ?? null,
    finished: pod.finished,
  };
  if (pod.statusError !== undefined) out.statusError = pod.statusError;
  return out;
}

/** `metadata.name`, `namespace` and `resourceVersion` of a pod, or why they are unusable. */
function identity(raw: unknown): { name: string; namespace: string; rv?: string } | string {
  const m = isPlainObject(raw) ? raw.metadata : undefined;
  if (!isPlainObject(m)) return "metadata: expected an object";
  const { name, namespace, resourceVersion: rv } = m;
  if (typeof name !== "string" || name === "") return "metadata.name: expected a string";
  if (typeof namespace !== "string" || namespace === "") {
    return "metadata.namespace: expected a string";
  }
  if (rv !== undefined && typeof rv !== "string") {
    return "metadata.resourceVersion: expected a string";
  }
  return { name, namespace, rv };
}

/**
 * Every pod of the cluster (`/api/v1/pods`, RBAC `list` and `watch`), each decoded into a
 * {@link PolicyPod} as it arrives (list pages of 500 are decoded one by one, see
 * lib/k8s/list.ts `listAll`).
 *
 * @param opts `nodeName`: this node (named ports are kept for its pods only; every pod's
 *   when absent); `intern`: the tables to share (default a new {@link Interner})
 * @returns the resource for `listWatch`
 * @throws {KubeError} from `parse`: `"decoding"` when a pod has no name or namespace (its
 *   content, when undecodable, gives a {@link PolicyPod} with `error` instead)
 * @example
 * ```ts
 * const r = policyPodsListWatch({ nodeName: "worker-1" });
 * r.parse({ metadata: { name: "p", namespace: "a", labels: { app: "db" } } }).pod?.labels;
 * // { app: "db" }
 * ```
 */
export function policyPodsListWatch(
  opts: { nodeName?: string; intern?: Interner } = {},
): ListWatchResource<PolicyPod> {
  const intern = opts.intern ?? new Interner();
  return {
    path: "/api/v1/pods",
    parse(raw: unknown): PolicyPod {
      const id = identity(raw);
      if (typeof id === "string") {
        throw new KubeError("decoding", "Invalid object from /api/v1/pods", { details: id });
      }
      const { name, namespace, rv } = id;
      const out: PolicyPod = { namespace: intern.string(namespace), name, resourceVersion: rv };
      try {
        const pod = parsePod(trimPod(raw as Parameters<typeof trimPod>[0]));
        const local = opts.nodeName === undefined || pod.nodeName === opts.nodeName;
        out.pod = compactPod(pod, local, intern);
      } catch (e) {
        out.error = errorText(e);
      }
      return out;
    },
    resourceVersion: (p) => p.resourceVersion,
  };
}

/**
 * Pods by namespace, then name: keyed by strings the pods already hold (their interned
 * namespace and their name), so the table adds no key string per pod.
 */
export class PodTable {
  readonly #byNs = new Map<string, Map<string, PodInfo>>();
  #size = 0;

  /** Number of pods held. */
  get size(): number {
    return this.#size;
  }

  /** The pod `namespace/name`, or undefined. */
  get(namespace: string, name: string): PodInfo | undefined {
    return this.#byNs.get(namespace)?.get(name);
  }

  /** Adds or replaces a pod. */
  set(pod: PodInfo): void {
    let names = this.#byNs.get(pod.namespace);
    if (!names) this.#byNs.set(pod.namespace, names = new Map());
    if (!names.has(pod.name)) this.#size++;
    names.set(pod.name, pod);
  }

  /** Removes `namespace/name`; returns whether it was held. */
  delete(namespace: string, name: string): boolean {
    const names = this.#byNs.get(namespace);
    if (!names?.delete(name)) return false;
    if (names.size === 0) this.#byNs.delete(namespace);
    this.#size--;
    return true;
  }

  /** Every pod held. */
  *values(): IterableIterator<PodInfo> {
    for (const names of this.#byNs.values()) yield* names.values();
  }
}
