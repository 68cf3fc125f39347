/**
 * The `KUBECONFIG` variable: a colon-separated list of kubeconfig files that kubectl merges
 * (client-go `clientcmd` `RecommendedConfigPathEnvVar`). Without its own imports, so the CLI
 * can ask "is one given?" without loading the loader.
 *
 * @module
 */

/**
 * The files of a `KUBECONFIG` value, in order: split on `:`, empty entries and repeats left out.
 *
 * @param value the variable's value, e.g. `"/root/.kube/config:/tmp/extra.yaml"`
 * @returns the paths; `[]` when unset or empty
 * @example kubeconfigPaths("a::b:a") // ["a", "b"]
 */
export function kubeconfigPaths(value: string | undefined): string[] {
  return [...new Set((value ?? "").split(":").filter((p) => p !== ""))];
}
