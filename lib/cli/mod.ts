/**
 * Manifold's command-line tools (the `manifold <command>` words other than the CNI plugin
 * itself): `manifold inspect` ({@link runInspect}), `manifold install` ({@link runInstall}),
 * `manifold doctor` ({@link runDoctor}), `manifold explain` ({@link runExplain}) and
 * `manifold mirror` ({@link runMirror}) and `manifold controller` ({@link runControllerCli}).
 *
 * @module
 */
export * from "./inspect.ts";
export * from "./inspect_report.ts";
export * from "./inspect_format.ts";
export * from "./install.ts";
export * from "./doctor.ts";
export * from "./doctor_checks.ts";
export * from "./doctor_api.ts";
export * from "./doctor_daemon.ts";
export * from "./explain.ts";
export * from "./mirror.ts";
export * from "./controller.ts";
export * from "./io.ts";
export type { KubeFlags } from "./kube_flags.ts";
export * from "./entry.ts";
