/**
 * Manifold's command-line tools (the `manifold <command>` words other than the CNI plugin
 * itself): `manifold inspect` ({@link runInspect}).
 *
 * @module
 */
export * from "./inspect.ts";
