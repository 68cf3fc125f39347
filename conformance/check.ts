/**
 * What a conformance check is, how one runs, and the small assertions checks share.
 *
 * A check names the spec section of the one normative statement it tests, its level (`MUST`:
 * the exit status depends on it; `SHOULD`: reported only; `INFO`: what the plugin does where
 * the spec defines no requirement to test, never a FAIL), and a `run` that throws
 * {@link CheckFailed} (FAIL; INFO for an `INFO` check) or {@link Skip} (SKIP, e.g. a claim the
 * plugin does not make). A check of a clause without a normative keyword says so in `reading`
 * (the suite's reading of it; the table marks its level with `*`).
 *
 * @module
 */

import type { PluginOutcome } from "../tests/support/plugin.ts";
import type { PodOptions, PodRun, Suite } from "./harness.ts";
import type { Recording } from "./recorder.ts";

/** PASS, FAIL, SKIP, or INFO (an `INFO` check that did not observe what it looks for). */
export type Verdict = "PASS" | "FAIL" | "SKIP" | "INFO";

/** One normative statement under test. */
export interface Check {
  /** Spec and section, e.g. `NPWG §3.4.2` or `CNI §Version`. */
  section: string;
  /** Short name. */
  name: string;
  level: "MUST" | "SHOULD" | "INFO";
  /**
   * Set when the clause has no normative keyword: the suite's reading of it, one sentence
   * (shown under the table; the level is marked `MUST*` / `SHOULD*`). A `MUST*` still
   * decides the exit status.
   */
  reading?: string;
  run(suite: Suite): Promise<void>;
}

/** A check's outcome. */
export interface Outcome {
  check: Check;
  verdict: Verdict;
  /** One line. */
  reason: string;
  ms: number;
  /**
   * Set when the verdict differed between `clusterNetwork` forms: each form's verdict
   * (`conflist`, `directory`); `verdict` is then the worst of them.
   */
  byForm?: Record<string, Verdict>;
}

/** Thrown by a check that found a violation. */
export class CheckFailed extends Error {}

/** Thrown by a check that cannot run (with the reason). */
export class Skip extends Error {}

/** Fails the check with `msg` unless `cond`. */
export function expect(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new CheckFailed(msg);
}

/**
 * Runs one check. {@link Skip} → SKIP; {@link CheckFailed} → FAIL, or INFO for an `INFO`
 * check; any other error is a FAIL with its message (the check could not observe what it
 * needs, e.g. ADD failed).
 */
export async function runCheck(check: Check, suite: Suite): Promise<Outcome> {
  const t0 = performance.now();
  let verdict: Verdict = "PASS";
  let reason = "";
  try {
    await check.run(suite);
  } catch (e) {
    verdict = e instanceof Skip
      ? "SKIP"
      : e instanceof CheckFailed && check.level === "INFO"
      ? "INFO"
      : "FAIL";
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

/** Variables a runtime leaves out of STATUS and GC (CNI SPEC 1.1 §2). */
export const RUNTIME_ONLY = ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS"];

/** The plugin's VERSION `supportedVersions` (asked with a 1.0.0 config); `[]` when none. */
export async function supported(s: Suite): Promise<string[]> {
  const p = await s.pod();
  try {
    const r = await p.call("VERSION", { config: { cniVersion: "1.0.0" } });
    return (r.json?.supportedVersions as string[] | undefined) ?? [];
  } finally {
    await p.cleanup();
  }
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
