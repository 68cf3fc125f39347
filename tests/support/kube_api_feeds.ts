/**
 * Generic list + watch for the API stand-in (tests/support/kube_api.ts), for collections
 * other than NADs: the history of one collection's changes and its open watches
 * ({@link WatchFeed}), a paged list answer ({@link listAnswer}) and kube-apiserver's
 * `labelSelector` / `fieldSelector` filters ({@link selectorFilter}). Shapes as
 * kube-apiserver's watch cache serves them: 200 `application/json`, chunked, one
 * `metav1.WatchEvent` per line; no resourceVersion (or `"0"`): synthetic ADDED events for
 * the current objects first; a resourceVersion older than the retained history: one `ERROR`
 * event with a `410 Expired` Status; `timeoutSeconds` ends the stream cleanly (a BOOKMARK
 * right before when bookmarks were allowed).
 *
 * @module
 */

import type { ServerResponse } from "node:http";

type Json = Record<string, unknown>;

/** One open watch of a feed. */
interface Watcher {
  res: ServerResponse;
  bookmarks: boolean;
  filter: (o: Json) => boolean;
  timers: ReturnType<typeof setTimeout>[];
}

/** The Status body of an error (`metav1.Status`). */
function status(code: number, reason: string, message: string): Json {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
}

/**
 * A `labelSelector`/`fieldSelector` filter as kube-apiserver applies them: label terms
 * `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`; field terms `path=v` /
 * `path!=v` over `metadata.name`, `metadata.namespace`, `spec.nodeName`, `status.phase`.
 *
 * @param url the request URL
 * @returns a predicate on stored objects
 * @throws Error with the 400 message for an unsupported field
 */
export function selectorFilter(url: URL): (o: Json) => boolean {
  const terms: ((o: Json) => boolean)[] = [];
  const labels = url.searchParams.get("labelSelector") ?? "";
  for (const t of labels.split(/,(?![^(]*\))/).map((s) => s.trim()).filter(Boolean)) {
    const get = (o: Json) => ((o.metadata as Json)?.labels as Json | undefined) ?? {};
    let m: RegExpMatchArray | null;
    if ((m = t.match(/^([^!=\s]+)\s+(in|notin)\s+\((.*)\)$/))) {
      const [, k, op, list] = m;
      const vals = list.split(",").map((s) => s.trim());
      terms.push((o) => {
        const v = get(o)[k] as string | undefined;
        return op === "in"
          ? v !== undefined && vals.includes(v)
          : v === undefined || !vals.includes(v);
      });
    } else if ((m = t.match(/^([^!=]+)(==|=|!=)(.*)$/))) {
      const [, k, op, v] = m;
      terms.push((o) => (get(o)[k.trim()] === v.trim()) === (op !== "!="));
    } else if (t.startsWith("!")) terms.push((o) => !(t.slice(1) in get(o)));
    else terms.push((o) => t in get(o));
  }
  const fields = url.searchParams.get("fieldSelector") ?? "";
  const known = ["metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"];
  for (const t of fields.split(",").map((s) => s.trim()).filter(Boolean)) {
    const m = t.match(/^([^!=]+)(==|=|!=)(.*)$/);
    if (!m || !known.includes(m[1])) {
      throw new Error(`field label not supported: ${m?.[1] ?? t}`);
    }
    const [, path, op, v] = m;
    const [a, b] = path.split(".");
    terms.push((o) => ((((o[a] as Json | undefined)?.[b]) ?? "") === v) === (op !== "!="));
  }
  return (o) => terms.every((f) => f(o));
}

/**
 * A list answer with `limit`/`continue` paging (the token pins the first page's
 * resourceVersion), as kube-apiserver returns it.
 *
 * @param opts `kind` of the list (`PodList`), its `apiVersion`, the items (sorted by the
 *   caller), the current resourceVersion, whether items keep `kind`/`apiVersion` (CRDs do,
 *   built-in types do not)
 * @param url the request URL
 * @returns the list object
 * @throws Error("continue") for an undecodable continue token (the caller answers 400)
 */
export function listAnswer(
  opts: { kind: string; apiVersion: string; items: Json[]; rv: number; keepKind: boolean },
  url: URL,
): Json {
  const all = opts.items.filter(selectorFilter(url));
  let start = 0;
  let listRv = opts.rv;
  const cont = url.searchParams.get("continue");
  if (cont) {
    try {
      const t = JSON.parse(atob(cont));
      start = Number(t.start) || 0;
      listRv = Number(t.rv) || listRv;
    } catch {
      throw new Error("continue");
    }
  }
  const limit = Number(url.searchParams.get("limit") ?? "0");
  const end = limit > 0 ? Math.min(all.length, start + limit) : all.length;
  const metadata: Json = { resourceVersion: String(listRv) };
  if (end < all.length) {
    metadata.continue = btoa(JSON.stringify({ rv: listRv, start: end }));
    metadata.remainingItemCount = all.length - end;
  }
  const items = all.slice(start, end).map((v) => {
    if (opts.keepKind) return v;
    const { kind: _k, apiVersion: _a, ...rest } = v;
    return rest;
  });
  return { kind: opts.kind, apiVersion: opts.apiVersion, metadata, items };
}

/** The change history of one collection and its open watches. */
export class WatchFeed {
  #events: { rv: number; type: string; object: Json }[] = [];
  #compactedRv = 0;
  #watchers = new Set<Watcher>();

  /**
   * An empty feed.
   *
   * @param kind the objects' kind (for bookmarks), e.g. `"Pod"`
   * @param apiVersion e.g. `"v1"`
   */
  constructor(readonly kind: string, readonly apiVersion: string) {}

  /** Open watches. */
  get watchCount(): number {
    return this.#watchers.size;
  }

  /**
   * Records a change (the object carries its new `metadata.resourceVersion`) and sends it to
   * the matching open watches.
   */
  emit(type: "ADDED" | "MODIFIED" | "DELETED", object: Json): void {
    const rv = Number((object.metadata as Json).resourceVersion);
    const ev = { rv, type, object: structuredClone(object) };
    this.#events.push(ev);
    for (const w of this.#watchers) if (w.filter(ev.object)) this.#write(w, type, ev.object);
  }

  /** Forgets the history up to `rv`: older watches get `410 Expired`. */
  compact(rv: number): void {
    this.#compactedRv = rv;
    this.#events = [];
  }

  /** Ends every open watch (`clean`: as a server timeout; else a dropped connection). */
  endAll(clean = true): void {
    for (const w of [...this.#watchers]) this.#close(w, clean);
  }

  /**
   * Serves one `?watch=1` request on `res` (see the module doc).
   *
   * @param url the request URL
   * @param res the response (headers not sent yet)
   * @param opts the current objects (sorted), the store's resourceVersion, periodic bookmarks
   * @throws Error("rv") for a non-numeric resourceVersion (the caller answers 400)
   */
  serve(
    url: URL,
    res: ServerResponse,
    opts: { current: Json[]; rv: number; bookmarkIntervalMs?: number },
  ): void {
    const rvParam = url.searchParams.get("resourceVersion") ?? "";
    if (rvParam !== "" && !/^\d+$/.test(rvParam)) throw new Error("rv");
    const w: Watcher = {
      res,
      bookmarks: ["1", "t", "true", "True", "TRUE"].includes(
        url.searchParams.get("allowWatchBookmarks") ?? "",
      ),
      filter: selectorFilter(url),
      timers: [],
    };
    res.writeHead(200, {
      "audit-id": crypto.randomUUID(),
      "cache-control": "no-cache, private",
      "content-type": "application/json",
    });
    res.flushHeaders();
    if (rvParam === "" || rvParam === "0") {
      for (const o of opts.current) if (w.filter(o)) this.#write(w, "ADDED", o);
    } else {
      const rv = Number(rvParam);
      if (rv < this.#compactedRv) {
        this.#write(
          w,
          "ERROR",
          status(410, "Expired", `too old resource version: ${rv} (${this.#compactedRv})`),
        );
        res.end();
        return;
      }
      for (const ev of this.#events) {
        if (ev.rv > rv && w.filter(ev.object)) this.#write(w, ev.type, ev.object);
      }
    }
    this.#watchers.add(w);
    res.on("close", () => this.#close(w, false));
    const timeoutSeconds = Number(url.searchParams.get("timeoutSeconds") ?? "0");
    const bookmark = () =>
      this.#write(w, "BOOKMARK", {
        kind: this.kind,
        apiVersion: this.apiVersion,
        metadata: { resourceVersion: String(this.#lastRv(opts.rv)) },
      });
    if (timeoutSeconds > 0) {
      w.timers.push(setTimeout(() => {
        if (w.bookmarks) bookmark();
        this.#close(w, true);
      }, timeoutSeconds * 1000));
    }
    if (w.bookmarks && opts.bookmarkIntervalMs) {
      w.timers.push(setInterval(bookmark, opts.bookmarkIntervalMs));
    }
  }

  #lastRv(atServe: number): number {
    return Math.max(atServe, this.#events.at(-1)?.rv ?? 0);
  }

  #write(w: Watcher, type: string, object: Json): void {
    if (w.res.destroyed || w.res.writableEnded) return;
    w.res.write(JSON.stringify({ type, object }) + "\n");
  }

  #close(w: Watcher, clean: boolean): void {
    if (!this.#watchers.delete(w)) return;
    for (const t of w.timers) clearTimeout(t);
    if (clean) w.res.end();
    else w.res.socket?.destroy();
  }
}
