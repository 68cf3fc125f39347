/** Hot-plug's difference between a pod's cached attachments and its plan (pure, no permissions). */

import assert from "node:assert/strict";
import {
  attachmentOrigin,
  diffAttachments,
  pinSelection,
  selectionText,
} from "../../../lib/daemon/hotplug/diff.ts";
import type { CachedAttachment } from "../../../lib/multinet/cache/cache.ts";
import type { AttachmentPlan, NetworkSelectionElement } from "../../../lib/multinet/types.ts";
import { parseNetworkSelection } from "../../../lib/multinet/plan/selection.ts";

function cached(
  statusName: string,
  ifName: string,
  more: Partial<CachedAttachment> = {},
): CachedAttachment {
  return {
    statusName,
    ifName,
    isDefault: false,
    origin: "selection",
    conflist: {},
    capabilityArgs: {},
    cniArgs: [],
    state: "added",
    ...more,
  };
}

function planned(
  statusName: string,
  ifName: string,
  selection?: Partial<NetworkSelectionElement>,
  capabilityArgs: Record<string, unknown> = {},
): AttachmentPlan {
  const [namespace, name] = statusName.split("/");
  return {
    delegate: { statusName, isDefault: false, source: "test", conflist: {} } as never,
    origin: selection ? "selection" : "defaultNetworks",
    ifName,
    selection: selection && { namespace, name, ...selection },
    capabilityArgs,
    cniArgs: [],
  };
}

const DEFAULT = cached("cbr0", "eth0", { isDefault: true, origin: "clusterDefault" });
const PLAN_DEFAULT: AttachmentPlan = {
  ...planned("cbr0", "eth0"),
  origin: "clusterDefault",
  selection: undefined,
};
/** A record written before origins were kept. */
function legacy(statusName: string, ifName: string): CachedAttachment {
  const { origin: _, ...rest } = cached(statusName, ifName);
  return rest;
}

Deno.test("pinSelection: elements without interface keep their network's interface", () => {
  const els = parseNetworkSelection("a, b, a", "ns");
  const pinned = pinSelection(els, [DEFAULT, cached("ns/a", "net1"), cached("ns/b", "net2")]);
  assert.deepEqual(pinned.map((e) => e.interface), ["net1", "net2", "net3"]);
  // An explicit interface claims its attachment; the unnamed one does not take it.
  const explicit = pinSelection(parseNetworkSelection("a, a@net1", "ns"), [
    DEFAULT,
    cached("ns/a", "net1"),
  ]);
  assert.deepEqual(explicit.map((e) => e.interface), ["net2", "net1"]);
});

Deno.test("pinSelection: new elements get names no defaultNetworks or KEP attachment holds", () => {
  const dn = cached("ns/dn", "net2", { origin: "defaultNetworks" });
  const kep = cached("ns/k", "net3", { origin: "kep" });
  const els = parseNetworkSelection("dn, x, y@net1, z", "ns");
  // `dn` as a selection element is a second attachment of that network, not the default one.
  assert.deepEqual(pinSelection(els, [DEFAULT, dn, kep]).map((e) => e.interface), [
    "net4",
    "net5",
    "net1",
    "net6",
  ]);
  // A removed selection attachment's name is free again; a legacy one's is not, unless claimed.
  const old = [DEFAULT, cached("ns/gone", "net1"), legacy("ns/l", "net2"), legacy("ns/m", "net3")];
  assert.deepEqual(
    pinSelection(parseNetworkSelection("m, new", "ns"), old).map((e) => e.interface),
    ["net3", "net1"],
  );
});

Deno.test("attachmentOrigin: recorded, else inferred conservatively", () => {
  assert.equal(attachmentOrigin(cached("ns/a", "net1"), 1), "selection");
  assert.equal(attachmentOrigin(legacy("ns/a", "net1"), 1), "unknown");
  assert.equal(attachmentOrigin(legacy("cbr0", "eth0"), 0), "clusterDefault");
  assert.equal(attachmentOrigin({ ...legacy("x", "net1"), isDefault: true }, 1), "clusterDefault");
  // A value this build does not know (a newer writer) is unknown, not trusted.
  assert.equal(
    attachmentOrigin({ ...legacy("x", "net1"), origin: "later" as never }, 1),
    "unknown",
  );
});

Deno.test("diffAttachments: only selection attachments are removed; held names refused", () => {
  const dn = cached("ns/bridge", "net1", { origin: "defaultNetworks" });
  const kep = cached("ns/k", "net3", { origin: "kep" });
  const sel = cached("ns/mac", "net2");
  // The reproduction: the selection asks for net1, which defaultNetworks holds; the
  // planner numbered the defaultNetworks attachment net4 this time.
  const d = diffAttachments([DEFAULT, dn, sel, kep], [
    PLAN_DEFAULT,
    planned("ns/bridge", "net4"),
    planned("ns/mac", "net1", { interface: "net1" }),
  ]);
  assert.deepEqual(d.add, []);
  assert.deepEqual(d.remove.map((a) => a.ifName), ["net2"]);
  assert.equal(d.refused.length, 1);
  assert.equal(d.refused[0].op, "add");
  assert.equal(
    d.refused[0].message,
    "network ns/mac interface net1: the interface is held by network ns/bridge " +
      "(defaultNetworks), which hot-plug never removes; choose another interface name",
  );
  // A KEP-3698 attachment holds its name too, and stays.
  const k = diffAttachments([DEFAULT, kep], [PLAN_DEFAULT, planned("ns/x", "net3", {})]);
  assert.deepEqual([k.add, k.remove], [[], []]);
  assert.match(k.refused[0].message, /held by network ns\/k \(KEP-3698/);
});

Deno.test("diffAttachments: an attachment of unknown origin stays unless named exactly", () => {
  const old = legacy("ns/a", "net1");
  // Still selected (name@ifName, as pinSelection pins it): kept; the selection's from now on.
  const kept = diffAttachments([DEFAULT, old], [PLAN_DEFAULT, planned("ns/a", "net1", {})]);
  assert.deepEqual([kept.add, kept.remove, kept.refused], [[], [], []]);
  // No longer selected: kept, with a Warning (not for a configured defaultNetworks one).
  const gone = diffAttachments([DEFAULT, old], [PLAN_DEFAULT]);
  assert.deepEqual(gone.remove, []);
  assert.equal(gone.refused[0].op, "remove");
  assert.match(gone.refused[0].message, /^network ns\/a interface net1: .*does not remove it/);
  const dn = diffAttachments([DEFAULT, old], [PLAN_DEFAULT, planned("ns/a", "net2")]);
  assert.deepEqual([dn.add, dn.remove, dn.refused], [[], [], []]);
  // Its interface is held: a different network asking for it is refused.
  const other = diffAttachments([DEFAULT, old], [PLAN_DEFAULT, planned("ns/b", "net1", {})]);
  assert.deepEqual(other.add, []);
  assert.match(other.refused[0].message, /held by network ns\/a \(attached by a Manifold/);
  // Named exactly but its ADD never completed: re-plugged like a selection attachment.
  const half = diffAttachments(
    [DEFAULT, { ...old, state: "adding" }],
    [PLAN_DEFAULT, planned("ns/a", "net1", {})],
  );
  assert.deepEqual(half.remove.map((a) => a.ifName), ["net1"]);
  assert.deepEqual(half.add.map((p) => p.ifName), ["net1"]);
});

Deno.test("selectionText round-trips through the annotation parser, extensions kept", () => {
  const text = '[{"name":"a","namespace":"ns","interface":"x1","ips":["10.0.0.1/24"],' +
    '"example.com/key":"v"}]';
  const els = parseNetworkSelection(text, "ns");
  assert.deepEqual(parseNetworkSelection(selectionText(els), "ns"), els);
});

Deno.test("diffAttachments: added, removed, kept; default networks never removed", () => {
  const d = diffAttachments(
    [
      DEFAULT,
      cached("ns/a", "net1"),
      cached("ns/b", "net2"),
      cached("extra", "net3", { origin: "defaultNetworks" }),
    ],
    [
      PLAN_DEFAULT,
      planned("ns/a", "net1", {}),
      planned("extra", "net3"),
      planned("ns/c", "net4", {}),
    ],
  );
  assert.deepEqual(d.add.map((p) => p.ifName), ["net4"]);
  assert.deepEqual(d.remove.map((a) => a.ifName), ["net2"]);
  assert.deepEqual(d.refused, []);
  // Nothing selected: every selection attachment goes, the defaults stay.
  const all = diffAttachments([DEFAULT, cached("ns/a", "net1")], [PLAN_DEFAULT]);
  assert.deepEqual(all.remove.map((a) => a.ifName), ["net1"]);
});

Deno.test("diffAttachments: renamed interface = remove + add; changed ips/mac refused", () => {
  const renamed = diffAttachments(
    [DEFAULT, cached("ns/a", "net1")],
    [PLAN_DEFAULT, planned("ns/a", "data0", { interface: "data0" })],
  );
  assert.deepEqual(renamed.remove.map((a) => a.ifName), ["net1"]);
  assert.deepEqual(renamed.add.map((p) => p.ifName), ["data0"]);
  const changed = diffAttachments(
    [DEFAULT, cached("ns/m", "net1", { capabilityArgs: { ips: ["10.0.0.5/24"] } })],
    [PLAN_DEFAULT, planned("ns/m", "net1", {}, { ips: ["10.0.0.6/24"], mac: "02:00:00:00:00:01" })],
  );
  assert.deepEqual([changed.add, changed.remove], [[], []]);
  assert.equal(changed.refused.length, 1);
  assert.equal(changed.refused[0].op, "change");
  assert.match(changed.refused[0].message, /changing "ips", "mac" of an attached network/);
});

Deno.test("diffAttachments: every other key of an attached element is compared", () => {
  const conf = (cni?: Record<string, unknown>) => ({
    plugins: [{ type: "macvlan" }, { type: "tuning" }].map((p) =>
      cni ? { ...p, args: { cni } } : p
    ),
  });
  const attached = cached("ns/m", "net1", {
    capabilityArgs: { bandwidth: { ingressRate: 1000, ingressBurst: 10 } },
    conflist: conf({ role: "a" }),
  });
  const plan = (
    sel: Partial<NetworkSelectionElement>,
    caps: Record<string, unknown>,
    cni?: Record<string, unknown>,
  ) => {
    const p = planned("ns/m", "net1", sel, caps);
    return { ...p, delegate: { ...p.delegate, conflist: conf(cni) } };
  };
  const refused = (p: AttachmentPlan, a = attached) =>
    diffAttachments([DEFAULT, a], [PLAN_DEFAULT, p]).refused.map((r) => r.message);
  // Unchanged (key order of an object does not matter): nothing refused.
  assert.deepEqual(
    refused(plan({}, { bandwidth: { ingressBurst: 10, ingressRate: 1000 } }, { role: "a" })),
    [],
  );
  const one = refused(plan(
    { "default-route": ["10.9.0.1"] },
    {
      bandwidth: { ingressRate: 2000, ingressBurst: 10 },
      portMappings: [{ hostPort: 80, containerPort: 80, protocol: "tcp" }],
      infinibandGUID: "c2:11:22:33:44:55:66:77",
    },
    { role: "b", "ipam-claim-reference": "claim-1" },
  ));
  assert.equal(one.length, 1, "one Warning naming every key");
  assert.match(
    one[0],
    /^network ns\/m interface net1: changing "infiniband-guid", "portMappings", "bandwidth", "default-route", "cni-args", "ipam-claim-reference" of an attached network needs a re-plug/,
  );
  // A cni-args key removed is a change too; a removed default-route as well.
  assert.match(refused(plan({}, attached.capabilityArgs))[0], /changing "cni-args"/);
  const routed = cached("ns/m", "net1", { ...attached, defaultRoute: [] });
  assert.match(
    refused(plan({}, attached.capabilityArgs, { role: "a" }), routed)[0],
    /changing "default-route"/,
  );
});

Deno.test("diffAttachments: an attachment whose ADD never completed is re-plugged", () => {
  const d = diffAttachments(
    [DEFAULT, cached("ns/a", "net1", { state: "adding" })],
    [PLAN_DEFAULT, planned("ns/a", "net1", {})],
  );
  assert.deepEqual(d.remove.map((a) => a.ifName), ["net1"]);
  assert.deepEqual(d.add.map((p) => p.ifName), ["net1"]);
});

Deno.test("diffAttachments: default-route on a new element is refused", () => {
  const d = diffAttachments(
    [DEFAULT],
    [PLAN_DEFAULT, planned("ns/a", "net1", { "default-route": ["10.0.0.1"] })],
  );
  assert.deepEqual(d.add, []);
  assert.equal(d.refused[0].op, "add");
  assert.match(d.refused[0].message, /default-route/);
});

Deno.test("diffAttachments: a device-backed network is refused", () => {
  const p = planned("ns/sriov", "net1", {});
  const d = diffAttachments([DEFAULT], [PLAN_DEFAULT, {
    ...p,
    delegate: { ...p.delegate, resourceName: "intel.com/sriov" },
  }]);
  assert.deepEqual(d.add, []);
  assert.match(d.refused[0].message, /device-backed network \(resourceName intel.com\/sriov\)/);
});

Deno.test("diffAttachments: a kept attachment (its NAD gone) stays and holds its name", () => {
  const lost = cached("ns/gone", "net2");
  const other = cached("ns/a", "net1");
  // The planned selection left `gone` out (hotplug/apply.ts); `a` was removed from it.
  const d = diffAttachments(
    [DEFAULT, other, lost],
    [PLAN_DEFAULT, planned("ns/b", "net2", { interface: "net2" }), planned("ns/c", "net3", {})],
    [lost],
  );
  assert.deepEqual(d.remove.map((a) => a.ifName), ["net1"]);
  assert.deepEqual(d.add.map((p) => p.ifName), ["net3"]);
  assert.equal(d.refused.length, 1);
  assert.match(
    d.refused[0].message,
    /^network ns\/b interface net2: the interface is held by network ns\/gone \(still selected, its NetworkAttachmentDefinition deleted\), which stays while it is selected/,
  );
  // Without it, the same plan removes it.
  const before = diffAttachments([DEFAULT, other, lost], [
    PLAN_DEFAULT,
    planned("ns/c", "net3", {}),
  ]);
  assert.deepEqual(before.remove.map((a) => a.ifName).sort(), ["net1", "net2"]);
});
