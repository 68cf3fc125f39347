/**
 * Listing a collection and decoding its watch lines, for the list/watch loop of `watch.ts`:
 * what a listable and watchable resource is ({@link ListWatchResource}, e.g.
 * {@link NAD_LIST_WATCH}), a complete paged list ({@link listAll}), and one validated
 * `metav1.WatchEvent` ({@link parseWatchLine}).
 *
 * @module
 */

import { z } from "zod";
import type { KubeClient } from "./client.ts";
import { isResponseTooLarge, KubeError } from "./errors.ts";
import { type Logger, nullLogger } from "../log/mod.ts";
import {
  NAD_GROUP,
  NAD_RESOURCE,
  NAD_VERSION,
  type NetworkAttachmentDefinition,
  parseNetworkAttachmentDefinition,
} from "./types.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** `limit` of each list page unless told otherwise (client-go's). */
export const DEFAULT_PAGE_SIZE = 500;
/** Smallest page a lister shrinks to after pages over the body cap. */
export const MIN_PAGE_SIZE = 50;

/** A collection that can be listed and watched. */
export interface ListWatchResource<T> {
  /** Collection path without the server, e.g. `/apis/k8s.cni.cncf.io/v1/network-attachment-definitions`. */
  path: string;
  /**
   * Validates one object of a list answer or watch event.
   * @throws {KubeError} `"decoding"` when it is malformed
   */
  parse(raw: unknown): T;
  /** The object's `metadata.resourceVersion`, when it has one. */
  resourceVersion(item: T): string | undefined;
}

/** NetworkAttachmentDefinitions of all namespaces (NPWG v1.3 §3), as a {@link ListWatchResource}. */
export const NAD_LIST_WATCH: ListWatchResource<NetworkAttachmentDefinition> = {
  path: `/apis/${NAD_GROUP}/${NAD_VERSION}/${NAD_RESOURCE}`,
  parse: parseNetworkAttachmentDefinition,
  resourceVersion: (nad) => nad.metadata.resourceVersion,
};

function buildSchemas() {
  const meta = z.looseObject({ resourceVersion: z.string().min(1) });
  return {
    list: z.looseObject({
      metadata: z.looseObject({
        resourceVersion: z.string().min(1),
        continue: z.string().optional(),
      }),
      items: z.array(z.unknown()).nullish(),
    }),
    event: z.looseObject({
      type: z.enum(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]),
      object: z.looseObject({}),
    }),
    bookmark: z.looseObject({ metadata: meta }),
    status: z.looseObject({
      code: z.number().optional(),
      reason: z.string().optional(),
      message: z.string().optional(),
    }),
  };
}

let cachedSchemas: ReturnType<typeof buildSchemas> | undefined;
function schemas(): ReturnType<typeof buildSchemas> {
  return cachedSchemas ??= buildSchemas();
}

function decodingError(what: string, err: z.ZodError): KubeError {
  return new KubeError("decoding", what, { details: z.prettifyError(err) });
}

/** A complete list: every page's items and the first page's resourceVersion. */
export interface ListResult<T> {
  /** Every item, in the server's order. */
  items: T[];
  /** The list's `metadata.resourceVersion` (of its first page). */
  resourceVersion: string;
}

/**
 * Lists a whole collection, page by page (`limit` + `continue`; every page belongs to the
 * first page's snapshot, so its resourceVersion is the list's).
 *
 * @param kube the API client (its retries apply to each page)
 * @param resource what to list
 * A page whose answer is over the transport's body cap (`"ResponseTooLarge"`, final for that
 * request) is asked again with half the `limit`, down to {@link MIN_PAGE_SIZE}, from the same
 * `continue` token: one log line and `kube.listPageShrunk` (a metric in the daemon) per
 * halving. The cap itself stays (memory safety).
 *
 * @param kube the API client (its retries apply to each page)
 * @param resource what to list
 * @param opts `pageSize` (default 500); `onPage`, called after each page with the number of
 *   items taken so far, once the page's answer is no longer referenced (e.g. to collect it);
 *   `logger` for the halving line
 * @returns every item and the list's resourceVersion
 * @throws {KubeError} `"request"` (e.g. 403 without `list`; `transient` when unreachable;
 *   `"ResponseTooLarge"` when even a page of {@link MIN_PAGE_SIZE} is over the cap);
 *   `"decoding"` when an answer or an item is malformed (`msg` names the item)
 */
export async function listAll<T>(
  kube: KubeClient,
  resource: ListWatchResource<T>,
  opts: { pageSize?: number; onPage?: (items: number) => void; logger?: Logger } = {},
): Promise<ListResult<T>> {
  const items: T[] = [];
  let resourceVersion: string | undefined;
  let cont: string | undefined;
  let limit = opts.pageSize ?? DEFAULT_PAGE_SIZE;
  for (;;) {
    let page: { resourceVersion: string; continue?: string };
    try {
      page = await listPage(kube, resource, { limit, continue: cont }, items);
    } catch (err) {
      if (!isResponseTooLarge(err) || limit <= MIN_PAGE_SIZE) throw err;
      const next = Math.max(MIN_PAGE_SIZE, Math.floor(limit / 2));
      (opts.logger ?? nullLogger).warn("list page over the body cap, asking for smaller pages", {
        resource: resource.path,
        limit,
        nextLimit: next,
      });
      kube.listPageShrunk(resource.path, next);
      limit = next;
      continue;
    }
    resourceVersion ??= page.resourceVersion;
    cont = page.continue;
    opts.onPage?.(items.length);
    if (!cont) break;
  }
  return { items, resourceVersion: resourceVersion! };
}

/** One page, its items parsed into `items`; the answer is dropped when it returns. */
async function listPage<T>(
  kube: KubeClient,
  resource: ListWatchResource<T>,
  query: { limit: number; continue?: string },
  items: T[],
): Promise<{ resourceVersion: string; continue?: string }> {
  const raw = await kube.list(resource.path, query);
  const r = schemas().list.safeParse(raw);
  if (!r.success) throw decodingError(`Invalid list answer of ${resource.path}`, r.error);
  const first = items.length;
  for (const [i, item] of (r.data.items ?? []).entries()) {
    try {
      items.push(resource.parse(item));
    } catch (err) {
      throw err instanceof KubeError ? err.withSuffix(` at items[${first + i}]`) : err;
    }
  }
  return {
    resourceVersion: r.data.metadata.resourceVersion,
    continue: r.data.metadata.continue || undefined,
  };
}

/** One decoded watch line. */
export type WatchLine<T> =
  | { type: "ADDED" | "MODIFIED" | "DELETED"; object: T; resourceVersion?: string }
  | { type: "BOOKMARK"; resourceVersion: string }
  | { type: "ERROR"; code?: number; reason: string; message: string };

/**
 * Validates one watch line (`metav1.WatchEvent`).
 * @throws {KubeError} `"decoding"` on an unknown type or a malformed object
 */
export function parseWatchLine<T>(raw: unknown, resource: ListWatchResource<T>): WatchLine<T> {
  const s = schemas();
  const r = s.event.safeParse(raw);
  if (!r.success) throw decodingError(`Invalid watch event from ${resource.path}`, r.error);
  const { type, object } = r.data;
  if (type === "BOOKMARK") {
    const b = s.bookmark.safeParse(object);
    if (!b.success) throw decodingError(`Invalid BOOKMARK from ${resource.path}`, b.error);
    return { type, resourceVersion: b.data.metadata.resourceVersion };
  }
  if (type === "ERROR") {
    const st = s.status.safeParse(object);
    if (!st.success) throw decodingError(`Invalid ERROR event from ${resource.path}`, st.error);
    return {
      type,
      code: st.data.code,
      reason: st.data.reason ?? "",
      message: st.data.message ?? "",
    };
  }
  const item = resource.parse(object);
  return { type, object: item, resourceVersion: resource.resourceVersion(item) };
}
