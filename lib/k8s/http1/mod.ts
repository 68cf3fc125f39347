/**
 * A minimal HTTP/1.1 client, the API transport of the per-pod hot path: `transport.ts` (the
 * transport, its connection pool and GET pipelining) over `wire.ts` (one connection's reads and
 * writes, response framing). Callers on the hot path import `transport.ts` directly.
 *
 * @module
 */

export { type Http1Options, Http1Transport, MAX_PIPELINE_DEPTH } from "./transport.ts";
export { abortable } from "../../util/abortable.ts";
export { MAX_RESPONSE_BYTES, ResponseTooLargeError } from "../http_semantics.ts";
export type {
  ResponseHeaderReader,
  Transport,
  TransportRequest,
  TransportResponse,
} from "../transport_types.ts";
