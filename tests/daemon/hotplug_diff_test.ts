/** Hot-plug's difference between a pod's cached attachments and its plan (pure, no permissions). */

import assert from "node:assert/strict";
import { diffAttachments, pinSelection, selectionText } from "../../lib/daemon/hotplug_diff.ts";
import type { CachedAttachment } from "../../lib/multinet/cache/cache.ts";
import type { AttachmentPlan, NetworkSelectionElement } from "../../lib/multinet/types.ts";
import { parseNetworkSelection } from "../../lib/multinet/plan/selection.ts";

function cached(
  statusName: string,
  ifName: string,
  more: Partial<CachedAttachment> = {},
): CachedAttachment {
  return {
    statusName,
    ifName,
    isDefault: false,
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
    ifName,
    selection: selection && { namespace, name, ...selection },
    capabilityArgs,
    cniArgs: [],
  };
}

const DEFAULT = cached("cbr0", "eth0", { isDefault: true });
const PLAN_DEFAULT = { ...planned("cbr0", "eth0"), selection: undefined };

Deno.test("pinSelection: elements without interface keep their network's interface", () => {
  const els = parseNetworkSelection("a, b, a", "ns");
  const pinned = pinSelection(els, [DEFAULT, cached("ns/a", "net1"), cached("ns/b", "net2")]);
  assert.deepEqual(pinned.map((e) => e.interface), ["net1", "net2", undefined]);
  // An explicit interface claims its attachment; the unnamed one does not take it.
  const explicit = pinSelection(parseNetworkSelection("a, a@net1", "ns"), [
    DEFAULT,
    cached("ns/a", "net1"),
  ]);
  assert.deepEqual(explicit.map((e) => e.interface), [undefined, "net1"]);
});

Deno.test("selectionText round-trips through the annotation parser, extensions kept", () => {
  const text = '[{"name":"a","namespace":"ns","interface":"x1","ips":["10.0.0.1/24"],' +
    '"example.com/key":"v"}]';
  const els = parseNetworkSelection(text, "ns");
  assert.deepEqual(parseNetworkSelection(selectionText(els), "ns"), els);
});

Deno.test("diffAttachments: added, removed, kept; default networks never removed", () => {
  const d = diffAttachments(
    [DEFAULT, cached("ns/a", "net1"), cached("ns/b", "net2"), cached("extra", "net3")],
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
