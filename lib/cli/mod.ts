/**
 * Manifold's command-line tools (the `manifold <command>` words other than the CNI plugin
 * itself): `manifold inspect` ({@link runInspect}), `manifold install` ({@link runInstall}),
 * `manifold doctor` ({@link runDoctor}) and `manifold explain` ({@link runExplain}).
 *
 * @module
 */
export * from "./inspect.ts";
export * from "./install.ts";
export * from "./doctor.ts";
export * from "./explain.ts";
