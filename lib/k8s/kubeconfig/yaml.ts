/**
 * A kubeconfig that is not JSON, read as YAML: the `yaml` package (≈ 50 ms to import) is loaded
 * only here, and `document.ts` loads this module only for a file `JSON.parse` refuses (issue 30;
 * the installer writes JSON, which is YAML too).
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { KubeError } from "../errors.ts";

/**
 * Parses a kubeconfig's text as YAML (YAML 1.2, the `yaml` package's defaults).
 *
 * A kubeconfig holds secrets, and the `yaml` package quotes the offending lines in its errors:
 * the error keeps only the package's error code and the position.
 *
 * @param path the file, for the message
 * @param text its contents
 * @returns the decoded document (anything YAML can hold; checked by the caller)
 * @throws {KubeError} `"config"` "Kubeconfig <path> is neither valid JSON nor valid YAML",
 *   details e.g. `"BAD_INDENT at line 3, column 2"` (CNI code 7 once mapped by lib/multinet)
 * @example
 * ```ts
 * await parseKubeconfigYaml("/etc/kubeconfig", "current-context: a\n"); // { "current-context": "a" }
 * ```
 */
export async function parseKubeconfigYaml(path: string, text: string): Promise<unknown> {
  const { parse, YAMLParseError } = await lazyImport<typeof import("yaml")>("yaml");
  try {
    return parse(text);
  } catch (err) {
    let where = "";
    if (err instanceof YAMLParseError) {
      const pos = err.linePos?.[0];
      where = `${err.code}${pos ? ` at line ${pos.line}, column ${pos.col}` : ""}`;
    }
    throw new KubeError("config", `Kubeconfig ${path} is neither valid JSON nor valid YAML`, {
      details: where,
    });
  }
}
