/**
 * A kubeconfig user's exec credential plugin (`users[].user.exec`, clientcmd/api/v1
 * `ExecConfig`) as an {@link ExecCredentialConfig}, kept for the client to run on its first
 * request (`../exec_credential.ts`). `load.ts` loads this module only for a user with `exec`:
 * the plugin's own kubeconfig (a tokenFile) never does (issue 30).
 *
 * @module
 */

import type { ExecCredentialConfig } from "../connection.ts";
import { KubeError } from "../errors.ts";
import { type ExecEntry, resolvePath } from "./document.ts";

/** The API versions of `ExecCredential` an exec credential plugin may speak. */
export const EXEC_API_VERSIONS: readonly string[] = [
  "client.authentication.k8s.io/v1",
  "client.authentication.k8s.io/v1beta1",
];

/**
 * Resolves a user's `exec` entry, as client-go's `clientcmd` does: a command with a path
 * separator is relative to the kubeconfig's directory, a bare name is looked up in `PATH` when
 * run; `env` becomes a record; `args` default to none.
 *
 * @param exec the entry (checked by `document.ts`)
 * @param opts `user`: the user entry's name, for messages; `base`: the directory of the
 *   kubeconfig file defining the user
 * @returns the plugin to run
 * @throws {KubeError} `"config"` (CNI code 7 once mapped by lib/multinet) for an `apiVersion`
 *   not in {@link EXEC_API_VERSIONS} or `interactiveMode: Always` (no terminal here)
 * @example
 * ```ts
 * execConfig(
 *   { command: "bin/cred", apiVersion: "client.authentication.k8s.io/v1" },
 *   { user: "u1", base: "/etc/kube" },
 * ).command; // "/etc/kube/bin/cred"
 * ```
 */
export function execConfig(
  exec: ExecEntry,
  opts: { user: string; base: string },
): ExecCredentialConfig {
  const { user, base } = opts;
  const where = `user "${user}"`;
  if (!EXEC_API_VERSIONS.includes(exec.apiVersion)) {
    throw new KubeError(
      "config",
      `Kubeconfig ${where} has an exec plugin with apiVersion "${exec.apiVersion}", which is not supported`,
      { details: `supported: ${EXEC_API_VERSIONS.join(", ")}` },
    );
  }
  if (exec.interactiveMode === "Always") {
    throw new KubeError(
      "config",
      `Kubeconfig ${where} has an exec plugin that needs an interactive terminal (interactiveMode Always), which is not supported`,
      { details: "" },
    );
  }
  const env: Record<string, string> = {};
  for (const e of exec.env ?? []) env[e.name] = e.value;
  const command = exec.command.includes("/") ? resolvePath(base, exec.command) : exec.command;
  const out: ExecCredentialConfig = {
    command,
    args: exec.args ?? [],
    env,
    apiVersion: exec.apiVersion,
    provideClusterInfo: exec.provideClusterInfo === true,
    user,
  };
  if (exec.installHint) out.installHint = exec.installHint;
  return out;
}
