/**
 * Kubernetes label selectors (`metav1.LabelSelector`) evaluated against a label map:
 * `matchLabels` and every `matchExpressions` requirement must hold (AND). Kubernetes
 * semantics: `{}` selects everything; `NotIn` and `DoesNotExist` hold when the key is absent.
 *
 * @module
 */

import type { LabelSelector } from "./spec.ts";

/**
 * Whether `labels` satisfy `selector`.
 *
 * @param selector a validated selector (`In`/`NotIn` with values, `Exists`/`DoesNotExist` without)
 * @param labels the object's labels
 * @returns `true` when every matchLabels pair and every requirement holds; `{}` → `true`
 * @example
 * ```ts
 * matchesSelector({ matchExpressions: [{ key: "tier", operator: "NotIn", values: ["db"] }] }, {}) // true
 * matchesSelector({ matchLabels: { app: "web" } }, { app: "db" }) // false
 * ```
 */
export function matchesSelector(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const r of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, r.key);
    const values = r.values ?? [];
    switch (r.operator) {
      case "In":
        if (!has || !values.includes(labels[r.key])) return false;
        break;
      case "NotIn":
        if (has && values.includes(labels[r.key])) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
    }
  }
  return true;
}
