/**
 * The text of `manifold explain` for people (the `--json` output is the report itself).
 *
 * @module
 */

import type { ExplainReport } from "./explain_plan.ts";
import { printable } from "../util/text.ts";

/**
 * Formats the report for people: the pod and config, then per attachment its network,
 * source and interface, and per plugin the binary, the environment and the stdin config
 * (indented JSON). Pure.
 *
 * @param report from {@link explainPod}
 * @returns the text, ending with a newline
 */
export function formatExplainText(report: ExplainReport): string {
  const out: string[] = [
    `Pod ${report.pod.namespace}/${report.pod.name}${
      report.pod.uid ? ` (uid ${report.pod.uid})` : ""
    }`,
    `Config ${report.config} (cniVersion ${report.cniVersion})`,
    "Dry run of ADD: nothing is attached and no delegate runs.",
    ...(report.assumed ?? []).map((a) => `assumed: ${a}`),
    ...report.warnings.map((w) => `warning: ${w}`),
  ];
  report.attachments.forEach((a, i) => {
    const role = a.isDefault
      ? " (cluster default network)"
      : a.selection
      ? ""
      : " (defaultNetworks)";
    out.push(
      "",
      `Attachment ${i + 1}: ${a.ifName} <- ${a.network}${role}`,
      `  source: ${a.source}`,
    );
    if (a.selection) out.push(`  selection: ${JSON.stringify(a.selection)}`);
    a.plugins.forEach((p, j) => {
      out.push(
        `  plugin ${j + 1}/${a.plugins.length}: ${p.type} -> ${
          p.binary ?? `NOT FOUND (${p.problem})`
        }`,
        "    env:",
        ...Object.entries(p.env).map(([k, v]) => `      ${k}=${v}`),
        "    stdin:",
        ...JSON.stringify(p.stdin, null, 2).split("\n").map((l) => `      ${l}`),
      );
    });
    for (const n of a.notes) out.push(`  note: ${n}`);
  });
  return out.map((l) => printable(l, { keepNewlines: true })).join("\n") + "\n";
}
