/**
 * `manifold --help`: what a person sees when they run the binary by hand — the subcommands,
 * and how a container runtime calls it as a CNI plugin (as CNI's skel prints its "about"
 * text when `CNI_COMMAND` is unset: name, version, supported CNI versions).
 *
 * Loaded only for help (lib/cli/entry.ts decides with `wantsHelp`).
 *
 * @module
 */

import { SUPPORTED_VERSIONS } from "../cni/version.ts";

/**
 * The help text of the `manifold` binary, or of `kubectl manifold` (the kubectl plugin: only
 * the commands people run against a cluster, kubectl's kubeconfig by default).
 *
 * @param version Manifold's release version, e.g. `"0.1.0"`
 * @param options `kubectl`: the kubectl plugin's text
 * @returns the text, ending with a newline
 * @example
 * ```ts
 * manifoldHelp("0.1.0").startsWith("manifold 0.1.0"); // true
 * ```
 */
export function manifoldHelp(version: string, options: { kubectl?: boolean } = {}): string {
  if (options.kubectl) {
    return `kubectl manifold (manifold ${version}): Manifold's multi-network tools as a kubectl plugin

Commands:
  kubectl manifold explain POD -n NAMESPACE   what ADD would attach for a pod, and why
  kubectl manifold inspect POD -n NAMESPACE   the pod's attachments as the kernel sees them
  kubectl manifold doctor                     checks this node's Manifold setup

The kubeconfig is kubectl's: --kubeconfig, else $KUBECONFIG, else ~/.kube/config; --context
picks a context. Output: -o json|yaml (also --json).
Run 'kubectl manifold <command> --help' for a command's options.

Exit codes: the command's own (see its --help); 0 help; 2 unknown command.
`;
  }
  return `manifold ${version}: a Kubernetes multi-network CNI delegating plugin (NPWG v1.3)
CNI protocol versions supported: ${SUPPORTED_VERSIONS.join(", ")}

As a CNI plugin (how the container runtime calls it):
  CNI_COMMAND=ADD|DEL|CHECK|GC|STATUS|VERSION, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME,
  CNI_ARGS and CNI_PATH in the environment, the network configuration (JSON) on stdin;
  the result or a CNI error (JSON) on stdout. Install it as /opt/cni/bin/manifold and name
  it with "type": "manifold" in the first config of /etc/cni/net.d.

Commands for people:
  manifold inspect     the attachments of a pod or network namespace as the kernel sees them
  manifold explain     what ADD would attach for a pod, and why
  manifold doctor      checks this node's Manifold setup (binary, config, API, netlink, cache)
  manifold install     the node installer (the DaemonSet's entrypoint)
  manifold daemon      the node agent: serves forwarded CNI requests, hot-plug, policy
  manifold mirror      keeps a node-local copy of the NetworkAttachmentDefinitions
  manifold controller  the KEP-3698 PodNetwork controller (conditions, InUse finalizer)
  manifold version     prints the version (also --version, -v)
  manifold help        this text (also --help, -h)

Every command takes its configuration file as --config PATH. Installed as kubectl-manifold (a
symlink to this binary), 'kubectl manifold explain|inspect|doctor' works as a kubectl plugin.
Run 'manifold <command> --help' for a command's options.

Exit codes: the command's own (see its --help); 0 help or version; 2 unknown command; as a
CNI plugin, 0 or 1 with a CNI error on stdout.
`;
}
