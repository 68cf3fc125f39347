/**
 * The plugin's API credentials kept in step while the installer runs: the service-account
 * token and CA mirrored beside the generated config and the kubeconfig naming them
 * (lib/install/credentials.ts), refreshed on every poll, with the two warnings an operator
 * needs — the token left the service-account volume, or kubelet stopped rotating it.
 *
 * @module
 */

import type { Logger } from "../log/mod.ts";
import { readTextIfExists } from "../fs/atomic.ts";
import { errorText } from "../util/text.ts";
import { writePluginCredentials } from "./credentials.ts";
import { MANIFOLD_CONF_SUBDIR, SERVICE_ACCOUNT_FILES } from "./kubeconfig.ts";
import { tokenDue } from "./token_expiry.ts";

/** Where the credentials come from and go to. */
export interface CredentialKeeperOptions {
  /** API server URL written into the plugin's kubeconfig. */
  server: string;
  /** The service-account directory (installer view) holding `token` and `ca.crt`. */
  serviceAccountDir: string;
  /** Host path of the CNI configuration directory, no trailing `/`. */
  confDirHost: string;
  /** Maps a host path to the installer's view (`--host-root`). */
  host(p: string): string;
  logger: Logger;
}

/**
 * Mirrors and refreshes the plugin's token, CA and kubeconfig.
 *
 * A rotated token is in use one poll after kubelet swaps it (kubelet renews a projected token
 * at 80 % of its lifetime); `kubelet` pkg/kubelet/token/token_manager.go `requiresRefresh`.
 */
export class CredentialKeeper {
  /** Host path of the plugin's kubeconfig, once {@link sync} wrote it. */
  kubeconfigHost?: string;
  #o: CredentialKeeperOptions;
  /** A refresh failure was logged (once until one succeeds). */
  #refreshWarned = false;
  /** Due time (ISO) of the expired token last warned about; undefined while it is current. */
  #expiredWarned?: string;

  /** @param options see {@link CredentialKeeperOptions} */
  constructor(options: CredentialKeeperOptions) {
    this.#o = options;
  }

  /** Host path of the token copy the plugin reads. */
  get tokenPath(): string {
    return `${this.#o.confDirHost}/${MANIFOLD_CONF_SUBDIR}/${SERVICE_ACCOUNT_FILES.token}`;
  }

  /**
   * Mirrors the token and CA and writes the plugin's kubeconfig.
   * @throws {Deno.errors.NotFound} when no service-account token is mounted
   * @throws {Error} when the token is empty or a host directory cannot be written
   */
  async sync(): Promise<void> {
    const o = this.#o;
    this.kubeconfigHost = await writePluginCredentials({
      server: o.server,
      serviceAccountDir: o.serviceAccountDir,
      subdirHost: `${o.confDirHost}/${MANIFOLD_CONF_SUBDIR}`,
      host: o.host,
      logger: o.logger,
    });
  }

  /**
   * {@link sync} on every poll; a failure (the token left the service-account directory, say)
   * is a warning, logged once until it clears, and the plugin keeps the last copy. Then warns
   * (once per token) when the copy is past its due time (lib/install/token_expiry.ts): an
   * expired copy means kubelet stopped replacing it — the ServiceAccount was deleted, or
   * kubelet cannot get a new token — and the API server refuses the plugin's calls. Never
   * throws.
   */
  async refresh(): Promise<void> {
    try {
      await this.sync();
      this.#refreshWarned = false;
    } catch (err) {
      if (!this.#refreshWarned) {
        this.#o.logger.warn(
          "cannot refresh the plugin's credentials; the plugin keeps the last copy",
          { error: errorText(err), tokenFile: this.tokenPath },
        );
        this.#refreshWarned = true;
      }
    }
    await this.#warnIfExpired();
  }

  async #warnIfExpired(): Promise<void> {
    const path = this.tokenPath;
    const text = await readTextIfExists(this.#o.host(path)).catch(() => undefined);
    const due = text === undefined ? undefined : tokenDue(text);
    if (due === undefined || Date.now() < due.due.getTime()) {
      this.#expiredWarned = undefined;
      return;
    }
    const expiredAt = due.due.toISOString();
    if (this.#expiredWarned === expiredAt) return;
    this.#expiredWarned = expiredAt;
    this.#o.logger.warn(
      "the plugin's service-account token has expired and kubelet has not replaced it " +
        "(ServiceAccount deleted? kubelet unable to get a new token?): the API server refuses " +
        "it, or will once it is past acceptedUntil",
      {
        tokenFile: path,
        expiredAt,
        claim: due.claim,
        acceptedUntil: due.expires.toISOString(),
        ...(due.issuedAt ? { issuedAt: due.issuedAt.toISOString() } : {}),
      },
    );
  }
}
