/**
 * `ports[]` of a NetworkPolicy rule → port matches: protocol (default TCP), a single port,
 * a range `port`…`endPort`, or a named port resolved through the pod's container ports.
 *
 * @module
 */

import type { PolicyPort } from "./spec.ts";
import type { ContainerPort } from "./types.ts";

/** Layer-4 protocol names as nftables spells them. */
export type L4Protocol = "tcp" | "udp" | "sctp";

/** One port match: the protocol, and the destination port range (inclusive) when limited. */
export interface PortMatch {
  /** `tcp`, `udp` or `sctp`. */
  protocol: L4Protocol;
  /** First port; absent = every port of `protocol`. */
  from?: number;
  /** Last port (inclusive), ≥ `from`. */
  to?: number;
}

/** Result of {@link resolvePorts}. */
export interface ResolvedPorts {
  /** Matches, sorted and unique; `[null]` means any protocol and port (no `ports`). */
  matches: (PortMatch | null)[];
  /** Named ports that did not resolve (they match nothing, as in Kubernetes). */
  unresolved: string[];
}

function key(m: PortMatch): string {
  return `${m.protocol}:${String(m.from ?? 0).padStart(5, "0")}:${
    String(m.to ?? 65535).padStart(5, "0")
  }`;
}

/**
 * Resolves a rule's `ports[]`. A named port resolves through `namedPorts` (the selected
 * pod's `containers[].ports[]` for ingress) to every container port with that name and
 * protocol; no `namedPorts` or no match → it matches nothing and is listed as unresolved.
 *
 * @param ports the rule's `ports` (absent or `[]` = all ports, all protocols)
 * @param namedPorts container ports to resolve names against
 * @returns matches sorted by protocol then port range, and the unresolved names
 * @example
 * ```ts
 * resolvePorts([{ protocol: "UDP", port: 53 }, { port: 8000, endPort: 8080 }]).matches
 * // [{ protocol: "tcp", from: 8000, to: 8080 }, { protocol: "udp", from: 53, to: 53 }]
 * ```
 */
export function resolvePorts(
  ports: readonly PolicyPort[] | null | undefined,
  namedPorts?: readonly ContainerPort[],
): ResolvedPorts {
  if (!ports?.length) return { matches: [null], unresolved: [] };
  const found = new Map<string, PortMatch>();
  const unresolved: string[] = [];
  const add = (m: PortMatch) => found.set(key(m), m);
  for (const p of ports) {
    const protocol = (p.protocol ?? "TCP").toLowerCase() as L4Protocol;
    if (p.port == null) add({ protocol });
    else if (typeof p.port === "number") add({ protocol, from: p.port, to: p.endPort ?? p.port });
    else {
      const hits = (namedPorts ?? []).filter((c) =>
        c.name === p.port && c.protocol.toLowerCase() === protocol
      );
      if (!hits.length) unresolved.push(`${p.port}/${protocol}`);
      for (const c of hits) add({ protocol, from: c.port, to: c.port });
    }
  }
  return {
    matches: [...found.keys()].sort().map((k) => found.get(k)!),
    unresolved: unresolved.sort(),
  };
}
