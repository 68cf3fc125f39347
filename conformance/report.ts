/**
 * The suite's output: a plain-text table (section, check, level, verdict, one-line reason; a
 * level marked `*` is the suite's reading of a clause without a normative keyword, footnoted
 * under the table) and JUnit XML (one `testcase` per check; FAIL → `failure`, SKIP →
 * `skipped`, INFO → `system-out`).
 *
 * @module
 */

import type { Outcome } from "./check.ts";

/** The table as text, with a summary line. */
export function table(outcomes: Outcome[]): string {
  const rows = outcomes.map((o) => [
    o.check.section,
    o.check.name,
    levelOf(o),
    o.verdict,
    o.reason,
  ]);
  const head = ["Section", "Check", "Level", "Result", "Reason"];
  const widths = head.map((h, i) =>
    i === 4 ? 0 : Math.max(h.length, ...rows.map((r) => [...r[i]].length))
  );
  const line = (r: string[]) =>
    r.map((c, i) => i === 4 ? c : c + " ".repeat(widths[i] - [...c].length)).join("  ").trimEnd();
  const count = (v: string) => outcomes.filter((o) => o.verdict === v).length;
  const mustFails = outcomes.filter((o) => o.check.level === "MUST" && o.verdict === "FAIL");
  const readings = [
    ...new Map(
      outcomes.filter((o) => o.check.reading).map((
        o,
      ) => [`${o.check.section}, the suite's reading: ${o.check.reading}`, 0]),
    ).keys(),
  ];
  return [
    line(head),
    line(widths.map((w, i) => "-".repeat(i === 4 ? 6 : w))),
    ...rows.map(line),
    ...readings.length ? ["", ...readings.map((r) => `* ${r}`)] : [],
    "",
    `${outcomes.length} checks: ${count("PASS")} PASS, ${count("FAIL")} FAIL ` +
    `(${mustFails.length} MUST), ${count("SKIP")} SKIP, ${count("INFO")} INFO`,
  ].join("\n");
}

/** The level as shown: `MUST`, `SHOULD`, `INFO`; `*` appended for a reading. */
function levelOf(o: Outcome): string {
  return `${o.check.level}${o.check.reading ? "*" : ""}`;
}

function esc(s: string): string {
  return s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

/** JUnit XML of the run (`suiteName` e.g. `npwg-conformance`). */
export function junit(outcomes: Outcome[], suiteName: string, totalMs: number): string {
  const fails = outcomes.filter((o) => o.verdict === "FAIL").length;
  const skips = outcomes.filter((o) => o.verdict === "SKIP").length;
  const cases = outcomes.map((o) => {
    const attrs = `classname="${esc(o.check.section)}" name="${
      esc(`[${levelOf(o)}] ${o.check.name}`)
    }" time="${(o.ms / 1000).toFixed(3)}"`;
    if (o.verdict === "FAIL") {
      return `    <testcase ${attrs}>\n      <failure message="${
        esc(o.reason)
      }"/>\n    </testcase>`;
    }
    if (o.verdict === "SKIP") {
      return `    <testcase ${attrs}>\n      <skipped message="${
        esc(o.reason)
      }"/>\n    </testcase>`;
    }
    if (o.verdict === "INFO") {
      return `    <testcase ${attrs}>\n      <system-out>INFO: ${
        esc(o.reason)
      }</system-out>\n    </testcase>`;
    }
    return `    <testcase ${attrs}/>`;
  });
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<testsuites>`,
    `  <testsuite name="${esc(suiteName)}" tests="${outcomes.length}" failures="${fails}" ` +
    `skipped="${skips}" errors="0" time="${(totalMs / 1000).toFixed(3)}">`,
    ...cases,
    `  </testsuite>`,
    `</testsuites>`,
    "",
  ].join("\n");
}
