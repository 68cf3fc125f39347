/**
 * Routes as callers write them ({@link RouteSpec}) and their completion with the defaults
 * `ip route` uses (linux/rtnetlink.h `RT_TABLE_MAIN`, `RTPROT_BOOT`, `RT_SCOPE_*`, `RTN_UNICAST`).
 *
 * @module
 */

import {
  RT_SCOPE_LINK,
  RT_SCOPE_UNIVERSE,
  RT_TABLE_MAIN,
  RTN_UNICAST,
  RTPROT_BOOT,
} from "./constants.ts";
import { parseCidr } from "./ip.ts";
import type { Route } from "./route.ts";

/** A route to add or replace: the fields of {@link Route} with defaults. */
export interface RouteSpec {
  /** Destination prefix, `"a.b.c.d/nn"`, `"x::/nn"`; `"0.0.0.0/0"` / `"::/0"` for default. */
  dst: string;
  /** Next hop address, same family as `dst`. */
  gateway?: string;
  /** Outgoing ifindex. */
  oif?: number;
  /** Metric (`RTA_PRIORITY`); 0 = kernel default (IPv6 turns 0 into 1024). */
  priority?: number;
  /** Table, default 254 (main). */
  table?: number;
  /** `RTPROT_*`, default 3 (boot, as `ip route` uses). */
  protocol?: number;
  /** `RT_SCOPE_*`, default universe with a gateway, link without. */
  scope?: number;
  /** `RTN_*`, default 1 (unicast). */
  type?: number;
  /** `RTA_PREFSRC`. */
  prefsrc?: string;
}

/**
 * Completes a {@link RouteSpec} into a {@link Route} with the defaults `ip route` uses.
 *
 * @param spec the route to add
 * @returns the full route
 * @throws {TypeError} when `dst` is not a prefix
 * @example routeFromSpec({ dst: "0.0.0.0/0", gateway: "10.0.0.1", oif: 2 }).table // 254
 */
export function routeFromSpec(spec: RouteSpec): Route {
  const { family } = parseCidr(spec.dst);
  return {
    family,
    dst: spec.dst,
    gateway: spec.gateway,
    oif: spec.oif,
    priority: spec.priority ?? 0,
    table: spec.table ?? RT_TABLE_MAIN,
    protocol: spec.protocol ?? RTPROT_BOOT,
    scope: spec.scope ?? (spec.gateway ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK),
    type: spec.type ?? RTN_UNICAST,
    flags: 0,
    tos: 0,
    prefsrc: spec.prefsrc,
  };
}
