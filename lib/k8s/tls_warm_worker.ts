/**
 * Worker body of `warmTls()` (see `tls_warm.ts`): one {@link dummyHandshake} on this
 * worker's thread, then posts `{ ms }` and closes.
 *
 * @module
 */

import { dummyHandshake } from "./tls_warm.ts";

const ms = await dummyHandshake();
/** The worker global scope (this module only runs as a worker). */
const scope = self as unknown as { postMessage(msg: unknown): void; close(): void };
scope.postMessage({ ms });
scope.close();
