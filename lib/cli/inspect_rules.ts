/**
 * `manifold inspect --rules`: the MultiNetworkPolicy table in force in a network namespace
 * (`inet manifold_mnp`, read through libnftables, lib/policy), as a table section and as the
 * JSON key `multiNetworkPolicy`. Loaded only with `--rules` (libnftables is opened lazily).
 *
 * @module
 */

import { formatRules, libnftablesRunner, readRules } from "../policy/mod.ts";
import { errorText } from "../util/text.ts";

/** The rules of one namespace in both output forms. */
export interface PolicyRulesView {
  /** Merged into the `--json` report: `{ table }` (libnftables objects, `null`: none) or `{ error }`. */
  json: { multiNetworkPolicy: { table: Record<string, unknown>[] | null } | { error: string } };
  /** Appended to the table output: a blank line, a heading, the rendered rules. */
  text: string;
}

/**
 * Reads the table in force in `netns`. Never throws: a namespace that cannot be entered or a
 * missing libnftables is reported in the view.
 *
 * @param netns the namespace path
 * @returns both forms
 */
export async function policyRules(netns: string): Promise<PolicyRulesView> {
  const runner = libnftablesRunner();
  try {
    const table = await readRules(netns, { runner });
    const text = ["", "MultiNetworkPolicy rules:", ...formatRules(table)].join("\n") + "\n";
    return { json: { multiNetworkPolicy: { table } }, text };
  } catch (e) {
    const error = `Cannot read the MultiNetworkPolicy rules: ${errorText(e)}`;
    return { json: { multiNetworkPolicy: { error } }, text: `\n${error}\n` };
  } finally {
    await runner.close();
  }
}
