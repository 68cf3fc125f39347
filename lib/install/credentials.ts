/**
 * The plugin's API credentials on the host: the installer mirrors the service-account token
 * and CA of its own pod into `<cniConfDir>/manifold.d/` (0600) and writes a kubeconfig naming
 * them, so the plugin — a host process — reads a token that kubelet keeps rotating.
 *
 * @module
 */

import type { Logger } from "../log/mod.ts";
import { readTextIfExists, sameContent, writeFileAtomic } from "../fs/atomic.ts";
import { renderConfig } from "./conflist.ts";
import { buildPluginKubeconfig, KUBECONFIG_NAME, SERVICE_ACCOUNT_FILES } from "./kubeconfig.ts";

/** Input of {@link writePluginCredentials}. */
export interface PluginCredentialsOptions {
  /** API server URL written into the kubeconfig, e.g. `"https://10.96.0.1:443"`. */
  server: string;
  /** The service-account directory (installer view) holding `token` and `ca.crt`. */
  serviceAccountDir: string;
  /** Host path of the directory the files go to, e.g. `/etc/cni/net.d/manifold.d`. */
  subdirHost: string;
  /** A host path in the installer's view (below the host root). */
  host(path: string): string;
  /** Info lines when a file is (re)written. */
  logger: Logger;
}

/**
 * Mirrors the token (required, not empty) and the CA (when present; with no CA ever mirrored the
 * kubeconfig names none and the plugin uses the system roots) and writes the plugin's
 * kubeconfig naming them by host path; files that are already current are left alone. The
 * token copy is always a regular file with mode 0600, written by the installer (root in the
 * DaemonSet): a copy with the right bytes but other permission bits, or a link, is replaced.
 *
 * @param options server, service-account directory, target directory, path mapping, logger
 * @returns the kubeconfig's host path
 * @throws {Deno.errors.NotFound} when no service-account token is mounted (the message says
 *   where it was looked for and what to do)
 * @throws {Error} when the token is empty, or when the CA is missing but was mirrored before
 *   (the kubeconfig keeps naming the copy: a CA that was there is never silently replaced by
 *   the system roots)
 */
export async function writePluginCredentials(options: PluginCredentialsOptions): Promise<string> {
  const { subdirHost, host, logger: log } = options;
  const saDir = options.serviceAccountDir.replace(/\/+$/, "");
  const subdir = host(subdirHost);
  await Deno.mkdir(subdir, { recursive: true, mode: 0o700 });
  const token = `${saDir}/${SERVICE_ACCOUNT_FILES.token}`;
  const hostToken = `${subdir}/${SERVICE_ACCOUNT_FILES.token}`;
  if (!(await sameContent(token, hostToken)) || !(await ownPrivateFile(hostToken))) {
    const text = await Deno.readFile(token).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      throw new Deno.errors.NotFound(
        `no service-account token at ${token} (automountServiceAccountToken false, or another ` +
          "--service-account-dir?): the plugin's kubeconfig names a copy of it; pass " +
          "--no-kubeconfig on a node whose plugin needs no API (nadDir)",
      );
    });
    if (text.length === 0) throw new Error(`service-account token ${token} is empty`);
    await writeFileAtomic(hostToken, text, { mode: 0o600 });
    log.info("service-account token mirrored for the plugin", { path: hostToken });
  }
  const ca = `${saDir}/${SERVICE_ACCOUNT_FILES.ca}`;
  const hostCa = `${subdir}/${SERVICE_ACCOUNT_FILES.ca}`;
  let haveCa = true;
  if (!(await sameContent(ca, hostCa))) {
    const pem = await readTextIfExists(ca);
    if (pem !== undefined) await writeFileAtomic(hostCa, pem, { mode: 0o600 });
    else if ((await readTextIfExists(hostCa)) !== undefined) {
      // The CA left the service-account volume after it was mirrored: dropping it from the
      // kubeconfig would make the plugin trust the system roots instead (more servers, not
      // fewer). The kubeconfig keeps naming the last copy; the caller warns.
      throw new Error(
        `service-account CA ${ca} is missing; the plugin keeps trusting the last copy ${subdirHost}/${SERVICE_ACCOUNT_FILES.ca}`,
      );
    } else haveCa = false;
  }
  const kubeconfig = renderConfig(buildPluginKubeconfig({
    server: options.server,
    tokenFile: `${subdirHost}/${SERVICE_ACCOUNT_FILES.token}`,
    certificateAuthority: haveCa ? `${subdirHost}/${SERVICE_ACCOUNT_FILES.ca}` : undefined,
  }));
  const path = `${subdir}/${KUBECONFIG_NAME}`;
  if ((await readTextIfExists(path)) !== kubeconfig) {
    await writeFileAtomic(path, kubeconfig, { mode: 0o600 });
    log.info("wrote the plugin's kubeconfig", { path, server: options.server });
  }
  return `${subdirHost}/${KUBECONFIG_NAME}`;
}

/**
 * True when `path` is a regular file (not a link) with mode 0600. (Its owner is whoever wrote
 * it, the installer; comparing with the process's uid would need `--allow-sys`, which the
 * compiled binary does not have.)
 */
async function ownPrivateFile(path: string): Promise<boolean> {
  try {
    const st = await Deno.lstat(path);
    return st.isFile && ((st.mode ?? 0) & 0o7777) === 0o600;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}
