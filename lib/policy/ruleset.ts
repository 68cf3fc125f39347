/**
 * The desired state of one pod, independent of the nftables encoding: per interface of a
 * policed network, the allow rules of each isolated direction (default drop after them),
 * and the named address sets the rules refer to. {@link ./nft.ts} renders it as a
 * libnftables JSON batch.
 *
 * @module
 */

import type { IpFamily } from "./cidr.ts";
import type { PortMatch } from "./ports.ts";

/** A named nftables set of addresses (a peer group on one network). */
export interface AddressSet {
  /** Set name, unique in the pod's table, e.g. `"in_net1_0_v4"`. */
  name: string;
  /** Address family (`ipv4_addr` or `ipv6_addr` set). */
  family: IpFamily;
  /** Interval set (`ipBlock` CIDRs) or plain addresses (pods). */
  interval: boolean;
  /** Canonical addresses, or CIDRs for interval sets; sorted by address, unique. */
  elements: string[];
}

/** One accept rule: a peer (set) × a port match. */
export interface AllowRule {
  /** Where it comes from, e.g. `"ns/policy ingress[0] from[1]"` (≤ 120 chars). */
  comment: string;
  /** The peer's set; absent = any address. */
  set?: string;
  /** Port match; `null` = any protocol and port. */
  port: PortMatch | null;
}

/** The policy of one pod interface; a present direction is isolated (default drop). */
export interface InterfacePolicy {
  /** Interface in the pod, e.g. `"net1"`. */
  ifName: string;
  /** The network it is attached to (status name `"ns/nad"`). */
  network: string;
  /** Ingress allow rules, when ingress is isolated. */
  ingress?: AllowRule[];
  /** Egress allow rules, when egress is isolated. */
  egress?: AllowRule[];
}

/** Everything programmed into one pod's network namespace. */
export interface PodRuleset {
  /** Policed interfaces, sorted by `ifName`. */
  interfaces: InterfacePolicy[];
  /** Sets referenced by the rules, sorted by name. */
  sets: AddressSet[];
  /**
   * Fail-closed lockdown when the pod's interfaces are unknown (unreadable network-status):
   * drop both directions on every interface except these (loopback and the default
   * network's `eth0`).
   */
  lockdown?: { keep: string[] };
}

/** Something that made a ruleset narrower than the policy text (→ a Warning event). */
export interface PolicyProblem {
  /** Machine-readable reason, e.g. `"InvalidPolicy"`, `"UnreadableNetworkStatus"`. */
  reason: string;
  /** Sentence-case message for the event. */
  message: string;
  /** The local pod concerned (`ns/name`), when there is one. */
  pod?: string;
  /** The policy concerned (`ns/name`), when there is one. */
  policy?: string;
}
