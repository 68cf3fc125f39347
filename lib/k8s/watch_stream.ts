/**
 * The body of a watch answer (`GET …?watch=1`): newline-delimited JSON, one
 * `metav1.WatchEvent` per line, decoded as the chunks arrive. Loaded by the first watch only.
 *
 * @module
 */

import { KubeError, noAnswerError } from "./errors.ts";
import type { StreamResponse } from "./stream.ts";
import { errorText } from "../util/text.ts";

/** Longest watch line accepted, in characters (a single object beyond this is refused). */
export const MAX_WATCH_LINE = 16 * 1024 * 1024;

/** Context of {@link watchLines}. */
export interface WatchLinesOptions {
  /** The request path with its query, for messages. */
  path: string;
  /** Whether the watch was stopped (client closed, or a stop signal). */
  aborted: () => boolean;
  /** Called once, before the first line is read. */
  onOpen?: () => void;
}

/**
 * Yields each line of a 2xx watch answer decoded as JSON (unvalidated) until the server ends
 * the response; the response is released when the iteration ends in any way.
 *
 * @param res the open 2xx answer
 * @param opts the path (for messages), the stop check, `onOpen`
 * @returns an async iterator of the decoded lines
 * @throws {KubeError} `"decoding"` when a line is not JSON or is longer than
 *   {@link MAX_WATCH_LINE}; `"request"` with status 0 when the stream breaks
 *   (`"ConnectionFailed"`) or is stopped (`"Aborted"`).
 */
export async function* watchLines(
  res: StreamResponse,
  opts: WatchLinesOptions,
): AsyncGenerator<unknown, void, undefined> {
  const call = { method: "GET", path: opts.path, attempts: 1 };
  const abortedError = (err?: unknown) =>
    noAnswerError(call, "Aborted", err === undefined ? "the watch was cancelled" : errorText(err));
  const decodeLine = (line: string): unknown => {
    try {
      return JSON.parse(line);
    } catch (err) {
      throw new KubeError(
        "decoding",
        `Kubernetes API watch ${opts.path} sent a line that is not JSON`,
        { details: `${(err as Error).message}: ${line.slice(0, 200)}` },
      );
    }
  };
  try {
    opts.onOpen?.();
    const dec = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of res.body) {
        // A chatty stream (bookmarks) must not outlive a stop whose abort did not reach it.
        if (opts.aborted()) break;
        buf += dec.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line !== "") yield decodeLine(line);
        }
        if (buf.length > MAX_WATCH_LINE) {
          throw new KubeError(
            "decoding",
            `Kubernetes API watch ${opts.path} sent a line longer than ${MAX_WATCH_LINE} bytes`,
          );
        }
      }
    } catch (err) {
      if (err instanceof KubeError) throw err;
      if (opts.aborted()) throw abortedError(err);
      throw noAnswerError(call, "ConnectionFailed", `the watch stream broke: ${errorText(err)}`);
    }
    if (opts.aborted()) throw abortedError();
    const tail = (buf + dec.decode()).trim();
    if (tail !== "") yield decodeLine(tail);
  } finally {
    res.cancel();
  }
}
