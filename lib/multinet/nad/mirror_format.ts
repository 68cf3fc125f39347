/**
 * The NAD mirror's on-disk format (layout and rationale: `nad/mirror.ts`): paths, the file
 * object, the state file, and their parsers. Shared by the reader (the plugin) and the writer
 * (`manifold mirror`).
 *
 * @module
 */

import type { z as Zod } from "zod";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { KubeError } from "../../k8s/errors.ts";
import {
  NAD_GROUP,
  NAD_VERSION,
  type NetworkAttachmentDefinition,
  type ObjectMeta,
  parseNetworkAttachmentDefinition,
} from "../../k8s/types.ts";
import { isPlainObject } from "../../cni/netconf_checks.ts";
import { tuneZod } from "../../cni/decode.ts";
import { lazyImport } from "../../util/lazy.ts";

/** Where the DaemonSet keeps the mirror on the host (`manifold mirror --dir`, config `nadMirrorDir`). */
export const DEFAULT_NAD_MIRROR_DIR = "/run/k8s.cni.cncf.io/nads";
/** Name of the state file in the mirror directory. */
export const MIRROR_STATE_FILE = ".mirror.json";
/**
 * How old `syncedAt` may be for the reader to trust the mirror, ms: above kube-apiserver's
 * bookmark period (≈ 60 s) and the watch's 60 s silence bound (lib/k8s/watch.ts).
 */
export const MIRROR_MAX_AGE_MS = 90_000;
/** How far in the future `syncedAt` may be (clock steps), ms; beyond it the mirror is not trusted. */
export const MIRROR_MAX_CLOCK_SKEW_MS = 30_000;
/** Annotation left out of mirror files: a copy of the whole object, written by `kubectl apply`. */
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** The mirror's state file, `<dir>/.mirror.json`. Times are RFC 3339 UTC with milliseconds. */
export interface NadMirrorState {
  /** resourceVersion the mirror is known to reflect (of the list, or the last event/bookmark). */
  resourceVersion: string;
  /** Last evidence from the API server that the mirror is current (see the module doc). */
  syncedAt: string;
  /** When the last complete list was applied. */
  listedAt: string;
}

/** Names the mirror stores: DNS-1123 (sub)domain characters, never `.`/`..`, never a `/`. */
const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/**
 * Whether `name` can be a namespace or NAD name in the mirror's paths (lowercase
 * alphanumerics, `-` and `.`, starting and ending alphanumeric, at most 253 characters).
 * @example isMirrorName("macvlan-conf") // true
 * @example isMirrorName("../etc") // false
 */
export function isMirrorName(name: string): boolean {
  return name.length <= 253 && NAME.test(name);
}

/**
 * The path of a NAD's mirror file.
 * @example mirrorPath("/run/k8s.cni.cncf.io/nads", "default", "macvlan-conf")
 * // "/run/k8s.cni.cncf.io/nads/default/macvlan-conf.json"
 */
export function mirrorPath(dir: string, namespace: string, name: string): string {
  return `${trimMirrorDir(dir)}/${namespace}/${name}.json`;
}

/**
 * The object a mirror file holds for `nad` (see the module doc for the kept fields).
 *
 * @param nad a validated NetworkAttachmentDefinition
 * @returns `{apiVersion, kind, metadata, spec}`, ready for `JSON.stringify`
 * @example
 * ```ts
 * toMirrorObject({ metadata: { name: "a", namespace: "default", resourceVersion: "7" }, spec: {} })
 * // { apiVersion: "k8s.cni.cncf.io/v1", kind: "NetworkAttachmentDefinition",
 * //   metadata: { name: "a", namespace: "default", resourceVersion: "7" }, spec: {} }
 * ```
 */
export function toMirrorObject(nad: NetworkAttachmentDefinition): Record<string, unknown> {
  const { metadata, spec } = slimNad(nad);
  return {
    apiVersion: `${NAD_GROUP}/${NAD_VERSION}`,
    kind: "NetworkAttachmentDefinition",
    metadata,
    spec,
  };
}

/**
 * `nad` with only what Manifold reads, the fields a mirror file keeps: `metadata` (`name`,
 * `namespace`, `uid`, `resourceVersion`, `annotations` without
 * `kubectl.kubernetes.io/last-applied-configuration`) and `spec.config`; no `raw` (the API
 * object, with `managedFields`). What `manifold daemon` holds per NAD in memory.
 *
 * @param nad a validated NetworkAttachmentDefinition
 * @returns a new NetworkAttachmentDefinition sharing `nad`'s strings
 * @example
 * ```ts
 * slimNad({ metadata: { name: "a", namespace: "n" }, spec: { config: "{}" }, raw: { kind: "X" } })
 * // { metadata: { name: "a", namespace: "n" }, spec: { config: "{}" } }
 * ```
 */
export function slimNad(nad: NetworkAttachmentDefinition): NetworkAttachmentDefinition {
  const m = nad.metadata;
  const metadata: ObjectMeta = { name: m.name, namespace: m.namespace };
  if (m.uid !== undefined) metadata.uid = m.uid;
  if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
  if (m.annotations) {
    const { [LAST_APPLIED]: _dropped, ...kept } = m.annotations;
    if (Object.keys(kept).length > 0) metadata.annotations = kept;
  }
  return { metadata, spec: nad.spec.config === undefined ? {} : { config: nad.spec.config } };
}

function buildStateSchema(z: typeof Zod) {
  const time = z.iso.datetime({ offset: true });
  return z.looseObject({
    resourceVersion: z.string(),
    syncedAt: time,
    listedAt: time,
  });
}

let stateSchema: ReturnType<typeof buildStateSchema> | undefined;

/** A time as the mirror writes it (`Date.prototype.toISOString`), which zod's check accepts. */
const WRITTEN_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function isWrittenTime(v: unknown): v is string {
  if (typeof v !== "string" || !WRITTEN_TIME.test(v)) return false;
  const t = Date.parse(v);
  return !Number.isNaN(t) && new Date(t).toISOString() === v; // a real calendar time
}

/**
 * Validates the content of a state file.
 *
 * @param text the file's text
 * @returns the state (a state as the mirror writes it is checked without zod; any other is
 *   checked by zod, loaded then)
 * @throws {CniError} 6 when it is not JSON or lacks `resourceVersion`/`syncedAt`/`listedAt`
 *   (times must be RFC 3339); `details` is the prettified zod error
 * @example
 * ```ts
 * (await parseMirrorState('{"resourceVersion":"9","syncedAt":"2026-01-01T00:00:00.000Z","listedAt":"2026-01-01T00:00:00.000Z"}')).resourceVersion // "9"
 * ```
 */
export async function parseMirrorState(text: string): Promise<NadMirrorState> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "Invalid NetworkAttachmentDefinition mirror state",
      (err as Error).message,
    );
  }
  // What the mirror writes is accepted here; anything else is left to zod (loaded only then:
  // the plugin's ADD with a NAD mirror compiles no zod module), which words the error.
  if (
    isPlainObject(raw) && typeof raw.resourceVersion === "string" &&
    isWrittenTime(raw.syncedAt) && isWrittenTime(raw.listedAt)
  ) {
    // Every key kept, as zod's looseObject keeps them (a newer writer's fields included).
    return { ...raw } as unknown as NadMirrorState;
  }
  const { z } = await lazyImport<typeof import("zod")>("zod");
  tuneZod(z);
  const r = (stateSchema ??= buildStateSchema(z)).safeParse(raw);
  if (!r.success) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "Invalid NetworkAttachmentDefinition mirror state",
      z.prettifyError(r.error),
    );
  }
  return {
    resourceVersion: r.data.resourceVersion,
    syncedAt: r.data.syncedAt,
    listedAt: r.data.listedAt,
  };
}

/**
 * Validates the content of a NAD mirror file for `namespace`/`name`.
 *
 * @param text the file's text
 * @param namespace the namespace its path names
 * @param name the name its path names
 * @returns the NetworkAttachmentDefinition (`raw` is the file's object)
 * @throws {CniError} 6 when it is not JSON, not a `k8s.cni.cncf.io/v1`
 *   NetworkAttachmentDefinition, fails the NAD schema, or names another namespace/name
 */
export function parseMirrorFile(
  text: string,
  namespace: string,
  name: string,
): NetworkAttachmentDefinition {
  const fail = (details: string): never => {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `Invalid NetworkAttachmentDefinition mirror file for ${namespace}/${name}`,
      details,
    );
  };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    fail((err as Error).message);
  }
  const obj = raw as Record<string, unknown> | null;
  if (
    typeof obj !== "object" || obj === null || obj.kind !== "NetworkAttachmentDefinition" ||
    obj.apiVersion !== `${NAD_GROUP}/${NAD_VERSION}`
  ) {
    fail(`not a ${NAD_GROUP}/${NAD_VERSION} NetworkAttachmentDefinition`);
  }
  let nad: NetworkAttachmentDefinition;
  try {
    nad = parseNetworkAttachmentDefinition(raw);
  } catch (err) {
    return fail(err instanceof KubeError ? err.details : String(err));
  }
  if (nad.metadata.namespace !== namespace || nad.metadata.name !== name) {
    fail(`the file holds ${nad.metadata.namespace}/${nad.metadata.name}`);
  }
  return nad;
}

/**
 * A mirror directory without trailing slashes (`"/"` stays `"/"`).
 *
 * @param dir the directory as configured
 * @returns e.g. `"/run/k8s.cni.cncf.io/nads"` for `"/run/k8s.cni.cncf.io/nads/"`
 * @example
 * ```ts
 * trimMirrorDir("/run/nads//"); // "/run/nads"
 * ```
 */
export function trimMirrorDir(dir: string): string {
  return dir.length > 1 ? dir.replace(/\/+$/, "") : dir;
}
