/**
 * Placeholder of the daemon's health and metrics HTTP server (`/healthz`, `/readyz`,
 * `/metrics`), built on another branch; the lead takes that branch's file at merge.
 *
 * @module
 */

import type { DaemonObserver } from "./observer.ts";

/** Options of {@link startDaemonHttp}. */
export interface DaemonHttpOptions {
  /** `HOST:PORT` to listen on. */
  address: string;
  /** The daemon's readiness, for `/readyz`. */
  ready: () => { ok: boolean; reasons: string[] };
}

/**
 * Starts the health and metrics server.
 * @param _opts address and readiness
 * @returns the observer to give the daemon and a close function
 * @throws Error always: not built on this branch
 */
export function startDaemonHttp(
  _opts: DaemonHttpOptions,
): Promise<{ observer: DaemonObserver; close(): Promise<void> }> {
  return Promise.reject(new Error("metrics not built"));
}
