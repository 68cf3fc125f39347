/**
 * The node installer (`manifold install`): atomic file replacement, the primary CNI config
 * lookup, the generated `00-manifold.conflist`, the plugin's kubeconfig, the binary copy (or,
 * for the source variant, the bundle and its launcher) and the watch loop that ties them together ({@link runInstaller}).
 *
 * @module
 */
export * from "../fs/atomic.ts";
export * from "./primary.ts";
export * from "./conflist.ts";
export * from "./kubeconfig.ts";
export * from "./binary.ts";
export * from "./bundle.ts";
export * from "./bundle_prune.ts";
export * from "./launcher.ts";
export * from "./owned_dir.ts";
export * from "./source_install.ts";
export * from "./variant.ts";
export * from "./installer.ts";
export * from "./credentials.ts";
export * from "./token_expiry.ts";
export * from "./config_map.ts";
// Types of the signatures above that live in other folders (deno doc: no private type refs).
export type { NetworkConfigList } from "../cni/types.ts";
export type { LogFields, Logger } from "../log/mod.ts";
