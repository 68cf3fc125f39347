/**
 * The shapes of one HTTP exchange with the API server, shared by the transports
 * (`transport.ts`, `http1/`, `stream.ts`) and the client. Types only: importing it loads
 * nothing at run time.
 *
 * @module
 */

/** One request; `url` is absolute, `body` is UTF-8 text. */
export interface TransportRequest {
  /** HTTP method, e.g. `"GET"`. */
  method: string;
  /** Absolute URL, e.g. `"https://10.96.0.1:443/api/v1/namespaces/default/pods/p"`. */
  url: string;
  /** Request headers, lower-case names. */
  headers: Record<string, string>;
  /** The body as UTF-8 text, if any. */
  body?: string;
  /** Aborts connecting, sending and reading the body. */
  signal: AbortSignal;
}

/** Response headers: case-insensitive lookup (a `Headers` object fits). */
export interface ResponseHeaderReader {
  /**
   * The value of a header.
   * @param name the header's name, any case
   * @returns the value, repeated headers joined by ", "; null when absent
   */
  get(name: string): string | null;
}

/** The answer with its body fully read (so the connection can be reused). */
export interface TransportResponse {
  /** HTTP status. */
  status: number;
  /** Response headers. */
  headers: ResponseHeaderReader;
  /** The body, decoded as UTF-8. */
  body: string;
}

/** Sends requests over kept-alive connections until closed. */
export interface Transport {
  /**
   * Sends one request.
   * @param req the request
   * @returns the answer, body read
   * @throws whatever the underlying stack throws for connection, TLS and abort failures
   *   (the caller classifies them), or a `KubeError` of kind `"config"` when the TLS
   *   material is unusable.
   */
  send(req: TransportRequest): Promise<TransportResponse>;
  /**
   * Opens a connection for the next request when none is open or being opened, so that its
   * set-up (TCP, TLS, the CA pin check) is not on that request's path; nothing is sent on it.
   * Optional: a transport without it sets up connections as requests need them.
   * @param signal ends the set-up (the connection is then not kept)
   * @returns resolves when it is open (kept idle) or could not be; never rejects
   */
  preconnect?(signal: AbortSignal): Promise<void>;
  /** Closes pooled connections; idempotent. */
  close(): void;
}
