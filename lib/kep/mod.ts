/**
 * The KEP-3698 PodNetwork controller run by `manifold controller`: the life cycle as pure
 * functions ({@link desiredPodNetwork}, {@link desiredAttachment}), one write pass
 * ({@link reconcileAll}) and the list/watch loop ({@link runController}).
 *
 * @module
 */
export * from "./conditions.ts";
export * from "./reconcile.ts";
export * from "./controller.ts";
