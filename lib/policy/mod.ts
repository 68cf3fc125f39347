/**
 * MultiNetworkPolicy on secondary networks → nftables in each pod's network namespace.
 * `types.ts` validates the watched objects, `engine.ts` computes each local pod's
 * {@link PodRuleset} (pure), `nft.ts` renders it as a libnftables JSON batch, `apply.ts`
 * programs it atomically, and `reconcile.ts` ties them together for the resident daemon:
 * it feeds watched objects to a {@link PolicyReconciler} and calls `sync()`.
 *
 * @module
 */
export * from "./types.ts";
export {
  type Isolation,
  isValidPortName,
  type LabelSelector,
  type LabelSelectorRequirement,
  normalizeCidr,
  type PolicyPeer,
  type PolicyPort,
  type PolicySpec,
  type PolicyType,
  salvageIsolation,
} from "./spec.ts";
export { matchesSelector } from "../k8s/label_selector.ts";
export * from "./cidr.ts";
export * from "./ports.ts";
export * from "./ruleset.ts";
export * from "./engine.ts";
export * from "./nft.ts";
export * from "./runner.ts";
export * from "./libnftables_runner.ts";
export * from "./apply.ts";
export * from "./reconcile.ts";
export * from "./rules_text.ts";
/** The logger types the runner accepts (re-exported for the documentation). */
export type { LogFields, Logger } from "../log/mod.ts";
