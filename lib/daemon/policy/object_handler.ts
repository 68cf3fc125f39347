/**
 * The list+watch handler of the policy agent's MultiNetworkPolicies and namespaces
 * (lib/daemon/policy/agent.ts): it keeps only identities (the reconciler keeps the content), so
 * a re-list deletes what vanished; an object that cannot be taken in is logged and treated as
 * absent.
 *
 * @module
 */

import type { ListWatchHandler, WatchChange } from "../../k8s/mod.ts";
import type { Logger } from "../../log/mod.ts";
import { errorText } from "../../util/text.ts";
import type { KubeObject } from "./watch.ts";

/** The collections the policy agent lists and watches. */
export type PolicyKind = "policy" | "pod" | "namespace";

/** Options of {@link policyObjectHandler}. */
export interface PolicyObjectHandlerOptions {
  /** The daemon's log (objects ignored). */
  logger: Logger;
  /** Called when the collection has been listed (each `replace`). */
  listed: () => void;
  /** Called after each list or change (schedules a sync). */
  changed: () => void;
}

/**
 * The handler of one collection of {@link KubeObject}s (module doc).
 *
 * @param kind the collection (log lines)
 * @param upsert takes an object in; may throw (then `remove` is called: treated as absent)
 * @param remove forgets an object (by its identity)
 * @param opts see {@link PolicyObjectHandlerOptions}
 * @returns the handler for `listWatch`
 */
export function policyObjectHandler(
  kind: PolicyKind,
  upsert: (o: KubeObject) => void,
  remove: (o: KubeObject) => void,
  opts: PolicyObjectHandlerOptions,
): ListWatchHandler<KubeObject> {
  // Identities only (the reconciler keeps the content): what a re-list must delete.
  let held = new Map<string, KubeObject>();
  const identity = (o: KubeObject): KubeObject => ({
    metadata: { name: o.metadata.name, namespace: o.metadata.namespace },
  });
  const keyOf = (o: KubeObject) => `${o.metadata.namespace ?? ""}/${o.metadata.name}`;
  const put = (o: KubeObject) => {
    try {
      upsert(o);
    } catch (e) {
      // Unidentifiable or undecodable (e.g. non-string labels): treated as absent.
      opts.logger.warn("policy input ignored", {
        kind,
        object: keyOf(o),
        error: errorText(e),
      });
      remove(o);
    }
  };
  return {
    replace: (items) => {
      const next = new Map(items.map((o) => [keyOf(o), identity(o)]));
      for (const [k, o] of held) if (!next.has(k)) remove(o);
      for (const o of items) put(o);
      held = next;
      opts.listed();
      opts.changed();
      return Promise.resolve();
    },
    apply: (change: WatchChange<KubeObject>) => {
      if (change.type === "DELETED") {
        held.delete(keyOf(change.object));
        remove(change.object);
      } else {
        held.set(keyOf(change.object), identity(change.object));
        put(change.object);
      }
      opts.changed();
      return Promise.resolve();
    },
    progress: () => Promise.resolve(),
  };
}
