/**
 * Fuzz targets keeping the per-call path's fast checks of API-facing shapes equal to the zod
 * schemas they stand for (issue 30); see tests/fuzz/fast_checks.ts for the others and the
 * oracle. Targets:
 *
 * - `resultshape`: lib/cni/result_codecs.ts's `FAST_RESULT_SHAPES` against
 *   lib/cni/result_schemas.ts's zod schemas, per result family, on the `result` target's
 *   results (valid, mutated, random; IPv4/IPv6 near misses): what the fast check accepts, zod
 *   accepts with a deep-equal value; a valid result whose addresses are plain (no embedded
 *   IPv4) is always accepted by the fast check;
 * - `selectionshape`: lib/multinet/plan/selection_fast.ts's `FAST_ELEMENT` against
 *   selection_schema.ts's zod element schema, on every object element of the `selection`
 *   target's JSON annotations (valid, mutated, text-mutated, random), spec keys only as the
 *   parser passes them: what the fast check accepts, zod accepts with a deep-equal value;
 * - `k8sobjects`: lib/k8s/types.ts's `parsePod`, `parseNetworkAttachmentDefinition` and
 *   `parseList` (zod's loose object schemas written out by hand) against those zod schemas
 *   (kept here as the reference) on pods, NADs and lists (valid, mutated, random; `__proto__`
 *   and `length` keys, null, arrays): the same value, or a KubeError with the same message
 *   and details;
 * - `kubeconfigshape`: lib/k8s/kubeconfig/document.ts's `KUBECONFIG_SHAPE` against its zod schema
 *   (`checkKubeconfigWithZod`) on kubeconfig documents (valid with every optional part, near
 *   misses at any depth, mutated): what the fast check accepts, zod accepts with a deep-equal
 *   value; a valid document is always accepted by the fast check.
 *
 * @module
 */

import assert from "node:assert/strict";
import { z } from "zod";
import { CniError } from "../../lib/cni/errors.ts";
import { FAST_RESULT_SHAPES, type ResultFamily } from "../../lib/cni/result_codecs.ts";
import { validateResultWithZod } from "../../lib/cni/result_schemas.ts";
import { resultFamily, SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";
import { KubeError } from "../../lib/k8s/errors.ts";
import { checkKubeconfigWithZod, KUBECONFIG_SHAPE } from "../../lib/k8s/kubeconfig/mod.ts";
import {
  type ObjectMeta,
  parseList,
  parseNetworkAttachmentDefinition,
  parsePod,
} from "../../lib/k8s/types.ts";
import { FAST_ELEMENT } from "../../lib/multinet/plan/selection_fast.ts";
import { selectionSchemas } from "../../lib/multinet/plan/selection_schema.ts";
import { fastCheck } from "../../lib/util/shape.ts";
import { type FuzzTarget, mutateJson, randomJson, renderJson, type Rng } from "../support/fuzz.ts";
import { nearMiss, settle } from "./fast_checks.ts";
import { randomResult, RESULT_KEYS, RESULT_VALUES } from "./result.ts";
import { selectionTarget } from "./selection.ts";

/** The `resultshape` target (see the module doc). */
export const resultShapeTarget: FuzzTarget<
  { mode: string; family: ResultFamily; version: string; raw: unknown },
  unknown
> = {
  name: "resultshape",
  codes: [6],
  generate(r) {
    const version = r.pick(SUPPORTED_VERSIONS);
    const family = resultFamily(version);
    const x = r.float();
    let raw: unknown;
    let mode = "valid";
    if (x < 0.5) raw = randomResult(r, version);
    else if (x < 0.95) {
      mode = "mutated";
      raw = mutateJson(r, randomResult(r, version), { keys: RESULT_KEYS, values: RESULT_VALUES });
    } else (mode = "random"), (raw = randomJson(r, { keys: RESULT_KEYS, values: RESULT_VALUES }));
    if (r.chance(0.5)) raw = JSON.parse(renderJson(raw));
    return { mode, family, version, raw };
  },
  call({ mode, family, version, raw }) {
    const fast = fastCheck(FAST_RESULT_SHAPES[family], raw);
    let reference: unknown;
    try {
      reference = validateResultWithZod(family, raw, version);
    } catch (e) {
      assert.equal(fast, undefined, "the fast check accepted what zod rejects");
      throw e;
    }
    if (fast !== undefined) {
      assert.deepStrictEqual(fast, reference, "the fast check and zod differ");
    } else if (
      mode === "valid" && !/\d\.\d+\.\d+\.\d+/.test(
        JSON.stringify(raw).replace(
          /"[0-9.]+(\/\d+)?"/g,
          "",
        ),
      )
    ) {
      assert.fail("the fast check did not accept a valid result");
    }
    return reference;
  },
};

/** The `selectionshape` target (see the module doc). */
export const selectionShapeTarget: FuzzTarget<{ text: string }, unknown> = {
  name: "selectionshape",
  codes: [7],
  generate: (r) => ({ text: selectionTarget.generate(r).text }),
  call({ text }) {
    let list: unknown;
    try {
      list = JSON.parse(text);
    } catch {
      return [];
    }
    if (!Array.isArray(list)) return [];
    let rejected = "";
    const out = list.map((item) => {
      if (typeof item !== "object" || item === null || Array.isArray(item)) return undefined;
      const spec = Object.fromEntries(Object.entries(item).filter(([k]) => !k.includes(".")));
      const fast = fastCheck(FAST_ELEMENT, spec);
      const reference = selectionSchemas().element.safeParse(spec);
      if (fast !== undefined) {
        assert.ok(reference.success, "the fast check accepted what zod rejects");
        assert.deepStrictEqual(fast, reference.data, "the fast check and zod differ");
      }
      if (!reference.success) rejected = z.prettifyError(reference.error);
      return reference.data;
    });
    if (rejected) throw new CniError(7, "invalid network selection element", rejected);
    return out;
  },
};

/** The zod schemas lib/k8s/types.ts replaced (the reference of `k8sobjects`). */
function k8sSchemas() {
  const objectMeta = z.looseObject({
    name: z.string().min(1),
    namespace: z.string().min(1),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    annotations: z.record(z.string(), z.string()).nullish(),
  });
  return {
    pod: z.looseObject({ metadata: objectMeta }),
    nad: z.looseObject({
      metadata: objectMeta,
      spec: z.looseObject({ config: z.string().optional() }).nullish(),
    }),
    list: z.looseObject({ items: z.array(z.unknown()).nullish() }),
  };
}
let k8sZod: ReturnType<typeof k8sSchemas> | undefined;

function metaOf(m: z.infer<ReturnType<typeof k8sSchemas>["pod"]>["metadata"]): ObjectMeta {
  const meta: ObjectMeta = { name: m.name, namespace: m.namespace };
  if (m.uid !== undefined) meta.uid = m.uid;
  if (m.resourceVersion !== undefined) meta.resourceVersion = m.resourceVersion;
  if (m.annotations) meta.annotations = { ...m.annotations };
  return meta;
}

/** The reference parsers: lib/k8s/types.ts as it was with zod. */
const K8S_REFERENCE = {
  pod(raw: unknown) {
    const r = (k8sZod ??= k8sSchemas()).pod.safeParse(raw);
    if (!r.success) {
      throw new KubeError("decoding", "Invalid Pod object", { details: z.prettifyError(r.error) });
    }
    return { metadata: metaOf(r.data.metadata), raw: raw as Record<string, unknown> };
  },
  nad(raw: unknown) {
    const r = (k8sZod ??= k8sSchemas()).nad.safeParse(raw);
    if (!r.success) {
      throw new KubeError("decoding", "Invalid NetworkAttachmentDefinition object", {
        details: z.prettifyError(r.error),
      });
    }
    const spec: { config?: string } = {};
    if (r.data.spec?.config !== undefined) spec.config = r.data.spec.config;
    return { metadata: metaOf(r.data.metadata), spec, raw: raw as Record<string, unknown> };
  },
  list(raw: unknown) {
    const r = (k8sZod ??= k8sSchemas()).list.safeParse(raw);
    if (!r.success) {
      throw new KubeError("decoding", "Invalid list object", { details: z.prettifyError(r.error) });
    }
    return (r.data.items ?? []).map((item, i) => {
      try {
        return K8S_REFERENCE.nad(item);
      } catch (err) {
        throw err instanceof KubeError ? err.withSuffix(` at items[${i}]`) : err;
      }
    });
  },
};

const K8S_KEYS = [
  "metadata",
  "name",
  "namespace",
  "uid",
  "resourceVersion",
  "annotations",
  "spec",
  "config",
  "items",
  "kind",
  "__proto__",
  "length",
  "constructor",
];
const K8S_VALUES: unknown[] = [
  "",
  "a",
  "default",
  "{}",
  null,
  0,
  true,
  [],
  ["x"],
  {},
  { length: 0 },
  { length: "x" },
  { "k8s.v1.cni.cncf.io/networks": "net-a" },
  { a: 1 },
  JSON.parse('{"__proto__": "x", "b": "c"}'),
];

function k8sObject(r: Rng): Record<string, unknown> {
  const metadata: Record<string, unknown> = { name: "p", namespace: "default" };
  if (r.chance(0.5)) metadata.uid = "u-1";
  if (r.chance(0.3)) metadata.resourceVersion = "42";
  if (r.chance(0.6)) metadata.annotations = r.chance(0.1) ? null : { "a/b": "c" };
  const o: Record<string, unknown> = { kind: "Pod", metadata };
  if (r.chance(0.5)) o.spec = r.chance(0.1) ? null : { config: '{"cniVersion":"1.0.0"}' };
  return o;
}

/** The `k8sobjects` target (see the module doc). */
export const k8sObjectsTarget: FuzzTarget<{ kind: "pod" | "nad" | "list"; raw: unknown }, unknown> =
  {
    name: "k8sobjects",
    typedError: (e) => e instanceof KubeError ? `kube ${e.reason}` : undefined,
    generate(r) {
      const kind = r.pick(["pod", "nad", "list"] as const);
      const x = r.float();
      let raw: unknown = kind === "list"
        ? { items: Array.from({ length: r.int(3) }, () => k8sObject(r)) }
        : k8sObject(r);
      if (x >= 0.3 && x < 0.6) raw = nearMiss(r, raw, K8S_VALUES);
      else if (x >= 0.6 && x < 0.85) {
        raw = mutateJson(r, raw, { keys: K8S_KEYS, values: K8S_VALUES });
      } else if (x >= 0.85) raw = randomJson(r, { keys: K8S_KEYS, values: K8S_VALUES });
      return { kind, raw: r.chance(0.8) ? JSON.parse(renderJson(raw)) : raw };
    },
    call({ kind, raw }) {
      const shown = (e: unknown) =>
        e instanceof KubeError ? { message: e.message, details: e.details } : String(e);
      const fast = settle(() =>
        kind === "pod"
          ? parsePod(raw)
          : kind === "nad"
          ? parseNetworkAttachmentDefinition(raw)
          : parseList(raw, parseNetworkAttachmentDefinition)
      );
      const reference = settle(() => K8S_REFERENCE[kind](raw));
      assert.deepStrictEqual(
        fast.ok ? { accepted: fast.value } : { rejected: shown(fast.error) },
        reference.ok ? { accepted: reference.value } : { rejected: shown(reference.error) },
        "the hand-written check and zod disagree",
      );
      if (!fast.ok) throw fast.error;
      return fast.value;
    },
  };

/** A valid kubeconfig document, every optional part present or not. */
function kubeconfigDoc(r: Rng): Record<string, unknown> {
  const cluster: Record<string, unknown> = { server: "https://10.0.0.1:6443" };
  if (r.chance(0.5)) cluster["certificate-authority-data"] = "LS0t";
  if (r.chance(0.3)) cluster["certificate-authority"] = "ca.crt";
  if (r.chance(0.2)) cluster["insecure-skip-tls-verify"] = r.chance(0.5);
  if (r.chance(0.1)) cluster["tls-server-name"] = "kubernetes";
  const user: Record<string, unknown> = {};
  if (r.chance(0.4)) user.token = "t";
  if (r.chance(0.2)) user.tokenFile = "/var/run/token";
  if (r.chance(0.3)) {
    user["client-certificate-data"] = "LS0t";
    user["client-key-data"] = "LS0t";
  }
  if (r.chance(0.3)) {
    const exec: Record<string, unknown> = {
      command: "/usr/bin/cred",
      apiVersion: "client.authentication.k8s.io/v1",
    };
    if (r.chance(0.5)) exec.args = r.chance(0.2) ? null : ["get-token"];
    if (r.chance(0.5)) exec.env = r.chance(0.2) ? null : [{ name: "A", value: "b" }];
    if (r.chance(0.3)) exec.provideClusterInfo = true;
    if (r.chance(0.3)) exec.interactiveMode = "Never";
    if (r.chance(0.2)) exec.installHint = "install cred";
    user.exec = exec;
  }
  if (r.chance(0.1)) user["auth-provider"] = r.chance(0.5) ? null : { name: "gcp" };
  const doc: Record<string, unknown> = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: r.chance(0.05) ? null : cluster }],
    users: [{ name: "u", user: r.chance(0.05) ? null : user }],
    contexts: [{ name: "x", context: { cluster: "c", user: "u", namespace: "default" } }],
  };
  if (r.chance(0.8)) doc["current-context"] = "x";
  if (r.chance(0.1)) doc.users = null;
  return doc;
}

const KUBECONFIG_VALUES: unknown[] = ["", "x", 1, true, null, [], [""], {}, { name: "" }, [{}]];

/** The `kubeconfigshape` target (see the module doc). */
export const kubeconfigShapeTarget: FuzzTarget<{ mode: string; doc: unknown }, unknown> = {
  name: "kubeconfigshape",
  typedError: (e) => e instanceof KubeError ? "kube config" : undefined,
  generate(r) {
    const x = r.float();
    if (x < 0.35) return { mode: "valid", doc: JSON.parse(JSON.stringify(kubeconfigDoc(r))) };
    if (x < 0.75) return { mode: "near", doc: nearMiss(r, kubeconfigDoc(r), KUBECONFIG_VALUES) };
    const keys = ["clusters", "users", "contexts", "name", "cluster", "user", "exec", "env"];
    const doc = mutateJson(r, kubeconfigDoc(r), { keys, values: KUBECONFIG_VALUES });
    return { mode: "mutated", doc: JSON.parse(renderJson(doc)) };
  },
  call({ mode, doc }) {
    const fast = fastCheck(KUBECONFIG_SHAPE, doc);
    const reference = checkKubeconfigWithZod(z, doc);
    if (fast !== undefined) {
      assert.ok(reference.success, "the fast check accepted what zod rejects");
      assert.deepStrictEqual(fast, reference.data, "the fast check and zod differ");
    } else if (mode === "valid") assert.fail("the fast check did not accept a valid kubeconfig");
    if (!reference.success) {
      throw new KubeError("config", "Kubeconfig is malformed", { details: reference.details });
    }
    return reference.data;
  },
};
