/**
 * The credential each API request carries (request.ts sends it): a bearer token re-read from
 * its file on every request, so a rotated service-account token is used at once (Multus #852),
 * the last good value kept while the file cannot be read (client-go's cached file token
 * source); a static token; or an exec credential plugin's token or client certificate, the
 * plugin's module loaded and the plugin run on the first request only, and again once its
 * credential expires or after a 401 (`exec_credential.ts`).
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import type { Logger } from "../log/mod.ts";
import type { KubeConnection } from "./connection.ts";
import { KubeError } from "./errors.ts";
import type { ExecCredential, ExecCredentialSource } from "./exec_credential.ts";

/** What one request is sent with. */
export interface RequestCredential {
  /** The bearer token for the `Authorization` header; undefined: none. */
  token?: string;
  /** The connection, with the exec plugin's client certificate and key when it gave them. */
  conn: KubeConnection;
  /** The exec plugin's credential, to hand back to {@link RequestCredentials.invalidate}. */
  cred?: ExecCredential;
}

/** The credential source of one client's connection. */
export class RequestCredentials {
  #conn: KubeConnection;
  #logger: Logger;
  #signal: AbortSignal | undefined;
  #exec: ExecCredentialSource | undefined;
  #lastFileToken: string | undefined;

  /**
   * Creates it; nothing is read or run until {@link current}.
   * @param conn the connection: `token`, `tokenFile` or `exec`
   * @param opts where a token file that cannot be read is reported; what cancels an exec plugin
   */
  constructor(conn: KubeConnection, opts: { logger: Logger; signal?: AbortSignal }) {
    this.#conn = conn;
    this.#logger = opts.logger;
    this.#signal = opts.signal;
  }

  /**
   * The credential for the next request.
   * @returns the token and the connection to send it on (see {@link RequestCredential})
   * @throws {KubeError} `"credentials"` when the token file cannot be read and no token was
   *   ever read from it nor given; the exec plugin's errors (`exec_credential.ts`)
   */
  async current(): Promise<RequestCredential> {
    const conn = this.#conn;
    if (!conn.exec) return { token: await this.#token(), conn };
    if (!this.#exec) {
      const { ExecCredentialSource } = await lazyImport<typeof import("./exec_credential.ts")>(
        "./exec_credential.ts",
        import.meta.url,
      );
      this.#exec = new ExecCredentialSource(conn.exec, { cluster: conn, signal: this.#signal });
    }
    const cred = await this.#exec.get();
    return {
      token: cred.token,
      conn: cred.clientCertPem
        ? { ...conn, clientCertPem: cred.clientCertPem, clientKeyPem: cred.clientKeyPem }
        : conn,
      cred,
    };
  }

  /**
   * After a 401 to a request sent with `used`: the exec plugin runs again for the next one
   * (`ExecCredentialSource.invalidate`); nothing for a token (a token file is re-read anyway).
   * @param used the credential the refused request carried
   * @returns true when a cached exec credential was forgotten
   */
  invalidate(used?: ExecCredential): boolean {
    return this.#exec?.invalidate(used) ?? false;
  }

  async #token(): Promise<string | undefined> {
    const file = this.#conn.tokenFile;
    if (!file) return this.#conn.token;
    let reason = "the file is empty";
    try {
      const t = (await Deno.readTextFile(file)).trim();
      if (t) {
        this.#lastFileToken = t;
        return t;
      }
    } catch (err) {
      reason = (err as Error).message;
    }
    // Like client-go's cached file token source: keep the last good value, else the static token.
    const fallback = this.#lastFileToken ?? this.#conn.token;
    if (fallback) {
      this.#logger.warn("cannot read token file, using the previous token", {
        tokenFile: file,
        reason,
      });
      return fallback;
    }
    throw new KubeError("credentials", `Cannot read token file ${file}`, { details: reason });
  }
}
