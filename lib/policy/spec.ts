/**
 * The `spec` of a MultiNetworkPolicy (= `networking.k8s.io/v1` NetworkPolicySpec), validated
 * with zod, accepting what the reference enforcer (k8snetworkplumbingwg/multi-networkpolicy-
 * iptables, pkg/server/policyrules.go and server.go) accepts, with its meaning:
 *
 * - `protocol` and `policyTypes` are case-insensitive (`tcp` = `TCP`, `ingress` = `Ingress`;
 *   the reference lowercases the protocol and compares types with `strings.EqualFold`);
 * - a bare address in `ipBlock.cidr` or `except` is a host prefix (`/32`, `/128`): the
 *   reference hands it to iptables, which reads it so (its own test: `except: ["1.1.1.1"]`);
 * - a peer with `ipBlock` and selectors is the `ipBlock` (the reference's
 *   "ignore podSelector and namespaceSelector when IPBlock field is set");
 * - `port: "8080"` (an all-digit string, no leading zero) is the number 8080, as the
 *   reference's `--dport 8080`; a named port needs a letter (Kubernetes `IsValidPortName`).
 *
 * When the spec is still invalid, {@link salvageIsolation} recovers what the policy isolates
 * (its own `podSelector` and `policyTypes`), so the engine closes exactly those pods and
 * directions with no allows: an invalid rule never selects pods the policy does not select.
 *
 * @module
 */

import { z } from "zod";
import { parseCidr, parseIp } from "./cidr.ts";
import type { LabelSelector } from "../k8s/label_selector.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** Label selectors (`metav1.LabelSelector`): Kubernetes semantics, lib/k8s/label_selector.ts. */
export type { LabelSelector, LabelSelectorRequirement } from "../k8s/label_selector.ts";

/** One `from[]`/`to[]` entry of a rule: an `ipBlock`, or pod and/or namespace selectors. */
export interface PolicyPeer {
  /** Pods (in the policy's namespace unless `namespaceSelector` is given). */
  podSelector?: LabelSelector | null;
  /** Namespaces whose pods (matching `podSelector`, if given) are peers. */
  namespaceSelector?: LabelSelector | null;
  /** A CIDR (`"a.b.c.d/nn"` or IPv6, always with a prefix length) minus `except` CIDRs. */
  ipBlock?: { cidr: string; except?: string[] | null } | null;
}

/** One `ports[]` entry. */
export interface PolicyPort {
  /** Default `TCP`; upper case after parsing. */
  protocol?: "TCP" | "UDP" | "SCTP" | null;
  /** A number 1–65535 or a container port name (IANA_SVC_NAME); absent = all ports. */
  port?: number | string | null;
  /** Last port of a range starting at the numeric `port` (inclusive). */
  endPort?: number | null;
}

/** A direction a policy isolates, as `policyTypes` spells it. */
export type PolicyType = "Ingress" | "Egress";

/** A validated `spec` of a MultiNetworkPolicy (= `networking.k8s.io/v1` NetworkPolicySpec). */
export interface PolicySpec {
  /** The pods of the policy's namespace it applies to (absent in the object = `{}`, all). */
  podSelector: LabelSelector;
  /** Directions it isolates; default Ingress, plus Egress when `egress` has rules. */
  policyTypes?: PolicyType[] | null;
  /** Allowed incoming traffic: peers (`from`) × `ports`. */
  ingress?: { from?: PolicyPeer[] | null; ports?: PolicyPort[] | null }[] | null;
  /** Allowed outgoing traffic: peers (`to`) × `ports`. */
  egress?: { to?: PolicyPeer[] | null; ports?: PolicyPort[] | null }[] | null;
}

const labels = z.record(z.string(), z.string());

const requirement = z.object({
  key: z.string().min(1),
  operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
  values: z.array(z.string()).nullish(),
}).refine(
  (r) =>
    r.operator === "In" || r.operator === "NotIn"
      ? (r.values?.length ?? 0) > 0
      : (r.values?.length ?? 0) === 0,
  { message: "In/NotIn need values, Exists/DoesNotExist take none" },
);

/** zod schema of a `metav1.LabelSelector`. */
const labelSelectorSchema: z.ZodType<LabelSelector> = z.object({
  matchLabels: labels.nullish(),
  matchExpressions: z.array(requirement).nullish(),
});

/**
 * Normalises an `ipBlock` CIDR: `addr/len` as given (host bits allowed, as the reference),
 * a bare address gets its full length.
 *
 * @param text `"10.0.0.0/8"`, `"1.1.1.1"`, `"fd00::/64"`, `"fd00::1"`
 * @returns `"addr/len"`, or `null` when it is neither a CIDR nor an address
 * @example normalizeCidr("1.1.1.1") // "1.1.1.1/32"
 */
export function normalizeCidr(text: string): string | null {
  if (text.includes("/")) return parseCidr(text) ? text : null;
  const ip = parseIp(text);
  return ip ? `${text}/${ip.family === "ipv4" ? 32 : 128}` : null;
}

const cidr = z.string().transform((s, ctx) => {
  const out = normalizeCidr(s);
  if (out === null) {
    ctx.addIssue({ code: "custom", message: `not a CIDR or an IP address: ${JSON.stringify(s)}` });
    return z.NEVER;
  }
  return out;
});

const ipBlock = z.object({ cidr, except: z.array(cidr).nullish() });

const peer = z.object({
  podSelector: labelSelectorSchema.nullish(),
  namespaceSelector: labelSelectorSchema.nullish(),
  ipBlock: ipBlock.nullish(),
}).refine((p) => !!(p.ipBlock || p.podSelector || p.namespaceSelector), {
  message: "a peer needs ipBlock, podSelector or namespaceSelector",
}).transform((p): PolicyPeer => (p.ipBlock ? { ipBlock: p.ipBlock } : p));

/**
 * Whether `name` is a valid named port (Kubernetes `validation.IsValidPortName`, the
 * IANA_SVC_NAME of RFC 6335 §5.1): 1–15 characters of `a-z`, `0-9` and `-`, at least one
 * letter, no `--`, no `-` at either end.
 *
 * @param name the candidate
 * @returns `true` when it is a port name
 * @example isValidPortName("http") // true; isValidPortName("8080") // false
 */
export function isValidPortName(name: string): boolean {
  return name.length >= 1 && name.length <= 15 && /^[a-z0-9-]+$/.test(name) &&
    /[a-z]/.test(name) && !name.includes("--") && !name.startsWith("-") && !name.endsWith("-");
}

const portNumber = z.number().int().min(1).max(65535);

const portValue = z.union([
  portNumber,
  z.string().transform((s, ctx) => {
    if (/^\d+$/.test(s)) {
      const n = Number(s);
      if (/^[1-9]\d{0,4}$/.test(s) && n <= 65535) return n;
      ctx.addIssue({ code: "custom", message: `port ${s} is not in 1–65535 (no leading zeros)` });
      return z.NEVER;
    }
    if (isValidPortName(s)) return s;
    ctx.addIssue({
      code: "custom",
      message: `${JSON.stringify(s)} is neither a port number nor a port name (IANA_SVC_NAME)`,
    });
    return z.NEVER;
  }),
]);

/** Upper-cases a string, then checks it against `values` (case-insensitive enum). */
function caseInsensitive<T extends string>(values: readonly [T, ...T[]]) {
  const canon = new Map(values.map((v) => [v.toUpperCase(), v]));
  return z.string().transform((s, ctx) => {
    const v = canon.get(s.toUpperCase());
    if (v === undefined) {
      ctx.addIssue({
        code: "custom",
        message: `${JSON.stringify(s)} is not one of ${values.join(", ")} (any case)`,
      });
      return z.NEVER;
    }
    return v;
  });
}

const protocol = caseInsensitive(["TCP", "UDP", "SCTP"] as const);
const policyType = caseInsensitive(["Ingress", "Egress"] as const);

const port = z.object({
  protocol: protocol.nullish(),
  port: portValue.nullish(),
  endPort: portNumber.nullish(),
}).refine(
  (p) => p.endPort == null || (typeof p.port === "number" && p.endPort >= p.port),
  { message: "endPort needs a numeric port ≤ endPort" },
);

const ingressRule = z.object({ from: z.array(peer).nullish(), ports: z.array(port).nullish() });
const egressRule = z.object({ to: z.array(peer).nullish(), ports: z.array(port).nullish() });

/** zod schema of a MultiNetworkPolicy `spec` (normalising as the module doc says). */
export const policySpecSchema: z.ZodType<PolicySpec> = z.object({
  podSelector: labelSelectorSchema.nullish().transform((s) => s ?? {}),
  policyTypes: z.array(policyType).nullish(),
  ingress: z.array(ingressRule).nullish(),
  egress: z.array(egressRule).nullish(),
});

/** What an invalid policy still isolates: its selection and its directions, no allows. */
export interface Isolation {
  /** Its `podSelector`, or `null` when that itself is unreadable (then: every pod of its namespace). */
  podSelector: LabelSelector | null;
  /** The directions it isolates. */
  policyTypes: PolicyType[];
}

/**
 * What an invalid spec still says about isolation: the `podSelector` when it parses (absent
 * = `{}`), and the `policyTypes` when they parse (absent or `[]`: Ingress, plus Egress when
 * `egress` is a non-empty list or unreadable (not a list), as for a valid spec; both when
 * `policyTypes` is unreadable).
 *
 * @param raw the `spec` value as received
 * @returns the isolation the engine enforces, with no allow rule
 * @example salvageIsolation({ podSelector: { matchLabels: { a: "b" } }, ingress: [{ ports: [{ port: 0 }] }] })
 * // { podSelector: { matchLabels: { a: "b" } }, policyTypes: ["Ingress"] }
 */
export function salvageIsolation(raw: unknown): Isolation {
  const both: PolicyType[] = ["Ingress", "Egress"];
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { podSelector: null, policyTypes: both };
  }
  const spec = raw as Record<string, unknown>;
  const sel = labelSelectorSchema.nullish().safeParse(spec.podSelector);
  const podSelector = sel.success ? sel.data ?? {} : null;
  if (spec.policyTypes != null && !(Array.isArray(spec.policyTypes) && !spec.policyTypes.length)) {
    const t = z.array(policyType).safeParse(spec.policyTypes);
    return { podSelector, policyTypes: t.success ? [...new Set(t.data)] : both };
  }
  // An `egress` that is present but not a list cannot be read: it may hold egress rules, so
  // Egress is isolated too (only an absent, null or empty list means "no egress rules").
  const egress = spec.egress != null && !(Array.isArray(spec.egress) && !spec.egress.length);
  return { podSelector, policyTypes: egress ? both : ["Ingress"] };
}
