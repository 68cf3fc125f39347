/**
 * What a conformance check is, how one runs, and the small assertions checks share.
 *
 * A check names the spec section of the one normative statement it tests, its level (`MUST`:
 * the exit status depends on it; `SHOULD`: reported only), and a `run` that throws
 * {@link CheckFailed} (FAIL) or {@link Skip} (SKIP, e.g. a claim the plugin does not make).
 *
 * @module
 */

import type { PluginOutcome } from "../tests/support/plugin.ts";
import type { PodOptions, PodRun, Suite } from "./harness.ts";
import type { Recording } from "./recorder.ts";

/** PASS, FAIL or SKIP. */
export type Verdict = "PASS" | "FAIL" | "SKIP";

/** One normative statement under test. */
export interface Check {
  /** Spec and section, e.g. `NPWG §3.4.2` or `CNI §Version`. */
  section: string;
  /** Short name. */
  name: string;
  level: "MUST" | "SHOULD";
  run(suite: Suite): Promise<void>;
}

/** A check's outcome. */
export interface Outcome {
  check: Check;
  verdict: Verdict;
  /** One line. */
  reason: string;
  ms: number;
}

/** Thrown by a check that found a violation. */
export class CheckFailed extends Error {}

/** Thrown by a check that cannot run (with the reason). */
export class Skip extends Error {}

/** Fails the check with `msg` unless `cond`. */
export function expect(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new CheckFailed(msg);
}

/** Runs one check; any other error is a FAIL with its message. */
export async function runCheck(check: Check, suite: Suite): Promise<Outcome> {
  const t0 = performance.now();
  let verdict: Verdict = "PASS";
  let reason = "";
  try {
    await check.run(suite);
  } catch (e) {
    verdict = e instanceof Skip ? "SKIP" : "FAIL";
    reason = e instanceof Error ? e.message : String(e);
  }
  return {
    check,
    verdict,
    reason: reason.replace(/\s+/g, " ").slice(0, 200),
    ms: Math.round(performance.now() - t0),
  };
}

/** A one-line account of a plugin call (exit code and the CNI error message). */
export function said(r: PluginOutcome): string {
  const msg = (r.json?.msg as string | undefined) ?? r.stdout.trim();
  return `exit ${r.code}${msg ? `: ${msg.slice(0, 120)}` : ""}`;
}

/** Fails unless the call succeeded. */
export function expectOk(r: PluginOutcome, what: string): void {
  expect(r.code === 0, `${what} failed (${said(r)})`);
}

/** Builds the pod, runs `fn`, and always cleans up. */
export async function withPod<T>(
  suite: Suite,
  opts: PodOptions,
  fn: (p: PodRun) => Promise<T>,
): Promise<T> {
  const p = await suite.pod(opts);
  try {
    return await fn(p);
  } finally {
    await p.cleanup();
  }
}

/** Recordings of `command` whose config has `name` (the network name) — or all of them. */
export function calls(recs: Recording[], command: string, name?: string): Recording[] {
  return recs.filter((r) =>
    r.env.CNI_COMMAND === command && (name === undefined || r.config.name === name)
  );
}

/** The single ADD recording of network `name`; fails when there is not exactly one. */
export function oneAdd(recs: Recording[], name: string): Recording {
  const adds = calls(recs, "ADD", name);
  expect(
    adds.length === 1,
    `expected one delegate ADD for network "${name}", saw ${adds.length} ` +
      `(networks: ${JSON.stringify(calls(recs, "ADD").map((r) => r.config.name))})`,
  );
  return adds[0];
}

/** `runtimeConfig` of a recording (empty object when absent). */
export function runtimeConfig(r: Recording): Record<string, unknown> {
  return (r.config.runtimeConfig ?? {}) as Record<string, unknown>;
}

/** The JSON selection annotation. */
export function networks(value: unknown): Record<string, string> {
  return {
    "k8s.v1.cni.cncf.io/networks": typeof value === "string" ? value : JSON.stringify(value),
  };
}

/** Deep equality through canonical JSON (key order ignored). */
export function same(a: unknown, b: unknown): boolean {
  return canon(a) === canon(b);
}

function canon(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canon).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canon(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}
