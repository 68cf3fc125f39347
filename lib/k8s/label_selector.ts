/**
 * Kubernetes label selectors (`metav1.LabelSelector`) evaluated against a label map:
 * `matchLabels` and every `matchExpressions` requirement must hold (AND). Kubernetes
 * semantics: `{}` selects everything; `NotIn` and `DoesNotExist` hold when the key is absent.
 * Used by MultiNetworkPolicy (lib/policy) and KEP-3698 `spec.allowedNamespaces` (lib/kep,
 * lib/multinet/plan); validating a selector is the caller's (its own zod schema).
 *
 * Source: k8s.io/apimachinery/pkg/apis/meta/v1 `LabelSelector`, `LabelSelectorRequirement`.
 *
 * @module
 */

/** One `matchExpressions` requirement (`metav1.LabelSelectorRequirement`). */
export interface LabelSelectorRequirement {
  /** The label key. */
  key: string;
  /** How `values` apply. */
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  /** Non-empty for `In`/`NotIn`, empty or absent otherwise. */
  values?: string[] | null;
}

/** A validated `metav1.LabelSelector`: matchLabels AND every requirement; `{}` selects all. */
export interface LabelSelector {
  /** Labels that must be present with these values. */
  matchLabels?: Record<string, string> | null;
  /** Requirements that must all hold. */
  matchExpressions?: LabelSelectorRequirement[] | null;
}

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
