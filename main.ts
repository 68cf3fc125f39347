/**
 * Manifold: a Kubernetes multi-network CNI delegating plugin (NPWG v1.3).
 *
 * Called by a container runtime with CNI_* variables and a config on stdin, it is a CNI
 * plugin. With a first argument it is a tool: `manifold --version`.
 *
 * @module
 */

import { denoSkelIO, dispatch } from "./lib/cni/skel.ts";
import { manifoldHandlers, realDeps } from "./lib/multinet/plugin.ts";

/** Manifold's release version. */
export const VERSION = "0.1.0";

if (import.meta.main) {
  const [first] = Deno.args;
  if (first === "--version" || first === "-v" || first === "version") {
    console.log(`manifold ${VERSION} (CNI 0.1.0 … 1.1.0)`);
    Deno.exit(0);
  }
  const code = await dispatch(manifoldHandlers(realDeps(Deno.env.toObject())), denoSkelIO());
  Deno.exit(code);
}
