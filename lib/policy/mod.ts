/**
 * MultiNetworkPolicy on secondary networks → nftables in each pod's network namespace.
 * `types.ts` validates the watched objects, `engine.ts` computes each local pod's
 * {@link PodRuleset} (pure), `nft.ts` renders it as a libnftables JSON batch and `apply.ts`
 * programs it atomically. The resident daemon feeds the engine and calls the applier.
 *
 * @module
 */
export * from "./types.ts";
export * from "./selector.ts";
export * from "./cidr.ts";
export * from "./ports.ts";
export * from "./ruleset.ts";
export * from "./engine.ts";
export * from "./nft.ts";
export * from "./runner.ts";
export * from "./libnftables_runner.ts";
export * from "./apply.ts";
