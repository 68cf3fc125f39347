/**
 * The node-local NetworkAttachmentDefinition mirror: `manifold mirror` (the DaemonSet) keeps
 * a directory in step with the API through list + watch ({@link NadMirrorWriter}), and the
 * plugin reads NADs from it ({@link mirrorNadSource}) so that an ADD whose pod annotations
 * come from the runtime needs no API read at all.
 *
 * Layout of the directory (default {@link DEFAULT_NAD_MIRROR_DIR}, mode 0700, files 0600 —
 * NAD reads are RBAC-protected in the cluster, the mirror must not widen that):
 *
 * - `<dir>/<namespace>/<name>.json`: one NAD, compact JSON + `\n`: `apiVersion`, `kind`,
 *   `metadata` (`name`, `namespace`, `uid`, `resourceVersion`, `annotations` without
 *   `kubectl.kubernetes.io/last-applied-configuration`, which only repeats the spec) and
 *   `spec` (`config` when set). Annotations are kept because delegate resolution reads
 *   `k8s.v1.cni.cncf.io/resourceName` (device-plugin allocation, the Multus/SR-IOV convention).
 * - `<dir>/.mirror.json`: the mirror's state, {@link NadMirrorState}:
 *   `{"resourceVersion","syncedAt","listedAt"}`. Namespaces and names never start with a dot,
 *   so it cannot collide with a namespace directory.
 *
 * Every file is replaced atomically (temporary file in the same directory, fsync, rename,
 * directory fsync): a reader sees the old or the new NAD, never a partial one.
 *
 * **When the mirror counts as current.** `syncedAt` is the last moment the writer had
 * evidence from the API server that the mirror matched it: a complete list applied, the
 * watch (re)opened from the recorded resourceVersion, an event or a BOOKMARK received, or
 * the 30 s heartbeat of a healthy open watch (see `lib/k8s/watch.ts`: a stream quiet for
 * 150 s on a server that sends periodic bookmarks stops counting as healthy, and each
 * stream is bounded to about 5 minutes). When the API cannot be reached, the heartbeat
 * stops; when `manifold mirror` stops cleanly it removes the state file. The reader trusts
 * the mirror while `syncedAt` is at most {@link MIRROR_MAX_AGE_MS} (90 s = 3 heartbeats)
 * old — and not more than 30 s in the future (a clock step) — and otherwise asks its
 * fallback (the API GET). A missing entry is always confirmed with the fallback (the NAD
 * may have been created a moment ago), so the answers equal `apiNadSource`'s: the only
 * difference is a change younger than the watch's delivery delay (milliseconds), as with
 * any informer cache.
 *
 * Files: `nad/mirror_format.ts` (paths, file object, state file, parsers),
 * `nad/mirror_reader.ts` ({@link mirrorNadSource}), `nad/mirror_writer.ts`
 * ({@link NadMirrorWriter}). The reader is part of the plugin's ADD: none of them imports
 * watch or API code at run time, only the NAD schema (`lib/k8s/types.ts`) and the
 * atomic-write helpers (no imports of their own).
 *
 * @module
 */

export * from "./mirror_format.ts";
export * from "./mirror_reader.ts";
export * from "./mirror_writer.ts";
