/**
 * Tests of lib/multinet/plan/plan.ts (NPWG v1.3 §4.1.2.1.3–11, §4.2, §6.2, §7.5). Pure: run
 * with no permissions (`deno test tests/multinet/plan_test.ts`).
 */

import { parseNetworkConfig } from "../../../lib/cni/types.ts";
import { delegateOf } from "../../../lib/multinet/plan/resolve.ts";
import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../../lib/cni/errors.ts";
import {
  declaresCapability,
  planAttachments,
  type PlanInput,
} from "../../../lib/multinet/plan/plan.ts";
import type { Delegate, NetworkSelectionElement } from "../../../lib/multinet/types.ts";

const POD = { namespace: "pod-ns", name: "pod-a", uid: "uid-1", infraContainerId: "cid-1" };
const ALL_CAPS = {
  ips: true,
  mac: true,
  infinibandGUID: true,
  portMappings: true,
  bandwidth: true,
};

function delegate(
  statusName: string,
  plugins: Record<string, unknown>[] = [{ type: "bridge" }],
  isDefault = false,
): Delegate {
  const list = parseNetworkConfig({
    cniVersion: "1.0.0",
    name: statusName.split("/").pop(),
    plugins,
  });
  return delegateOf(list, { statusName, isDefault, source: `nad:${statusName}` });
}

const DEFAULT = delegate("cbr0", [{ type: "flannel" }, {
  type: "portmap",
  capabilities: { portMappings: true },
}], true);

function sel(
  name: string,
  extra: Partial<NetworkSelectionElement> = {},
  plugins?: Record<string, unknown>[],
): PlanInput["selections"][number] {
  return {
    delegate: delegate(`pod-ns/${name}`, plugins),
    selection: { name, namespace: "pod-ns", ...extra },
  };
}

function input(over: Partial<PlanInput> = {}): PlanInput {
  return {
    pod: POD,
    runtimeIfName: "eth0",
    runtimeArgs: [],
    runtimeCapabilityArgs: {},
    defaultNetwork: DEFAULT,
    defaultNetworks: [],
    selections: [],
    ...over,
  };
}

function throws7(fn: () => unknown, pattern: RegExp): CniError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof CniError, `expected a CniError, got ${caught}`);
  assert.equal(caught.code, CniErrorCode.InvalidNetworkConfig);
  assert.match(caught.msg, pattern);
  return caught;
}

// ---------------------------------------------------------------- order and ifNames

Deno.test("order: default network, then defaultNetworks, then selections (§6.2)", () => {
  const plans = planAttachments(input({
    defaultNetworks: [delegate("kube-system/extra")],
    selections: [sel("net-a"), sel("net-b")],
  }));
  assert.deepEqual(plans.map((p) => [p.delegate.statusName, p.ifName]), [
    ["cbr0", "eth0"],
    ["kube-system/extra", "net1"],
    ["pod-ns/net-a", "net2"],
    ["pod-ns/net-b", "net3"],
  ]);
  assert.equal(plans[0].selection, undefined);
  assert.equal(plans[1].selection, undefined);
  assert.equal(plans[2].selection?.name, "net-a");
});

Deno.test("ifNames: explicit interfaces are reserved; automatic names skip them", () => {
  const plans = planAttachments(input({
    selections: [
      sel("a"),
      sel("b", { interface: "net1" }),
      sel("c"),
      sel("d", { interface: "eth5" }),
      sel("e"),
    ],
  }));
  assert.deepEqual(plans.map((p) => p.ifName), ["eth0", "net2", "net1", "net3", "eth5", "net4"]);
});

Deno.test("ifNames: a runtime CNI_IFNAME of net1 is skipped too", () => {
  const plans = planAttachments(input({ runtimeIfName: "net1", selections: [sel("a")] }));
  assert.deepEqual(plans.map((p) => p.ifName), ["net1", "net2"]);
});

Deno.test("ifNames: an explicit interface used earlier fails (§4.1.2.1.5)", () => {
  throws7(
    () =>
      planAttachments(
        input({ selections: [sel("a", { interface: "eth1" }), sel("b", { interface: "eth1" })] }),
      ),
    /^network "pod-ns\/b": interface "eth1" is already used by network "pod-ns\/a" \(NPWG v1\.3 §4\.1\.2\.1\.5\)$/,
  );
  throws7(
    () => planAttachments(input({ selections: [sel("a", { interface: "eth0" })] })),
    /interface "eth0" is already used by network "cbr0"/,
  );
});

Deno.test("the same NAD twice gives two attachments with distinct ifNames (§4.2)", () => {
  const plans = planAttachments(input({ selections: [sel("net-a"), sel("net-a")] }));
  assert.equal(plans.length, 3);
  assert.deepEqual(plans.slice(1).map((p) => [p.delegate.statusName, p.ifName]), [
    ["pod-ns/net-a", "net1"],
    ["pod-ns/net-a", "net2"],
  ]);
});

// ---------------------------------------------------------------- capabilities

const CAPABILITY_CASES: {
  key: keyof NetworkSelectionElement;
  capability: string;
  value: unknown;
  expected?: unknown;
}[] = [
  { key: "ips", capability: "ips", value: ["10.2.2.42/24", "2001:db8::5/64"] },
  { key: "mac", capability: "mac", value: "02:23:45:67:89:01" },
  { key: "infiniband-guid", capability: "infinibandGUID", value: "24:8a:07:03:00:8d:ae:2f" },
  {
    key: "portMappings",
    capability: "portMappings",
    value: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
  },
  { key: "bandwidth", capability: "bandwidth", value: { ingressRate: 2048, ingressBurst: 300 } },
];

for (const { key, capability, value } of CAPABILITY_CASES) {
  Deno.test(`capability "${capability}": passed as capabilityArgs when declared`, () => {
    const plugins = [{ type: "x" }, { type: "y", capabilities: { [capability]: true } }];
    const [, plan] = planAttachments(input({ selections: [sel("n", { [key]: value }, plugins)] }));
    assert.deepEqual(plan.capabilityArgs, { [capability]: value });
  });
  Deno.test(`capability "${capability}": the MUST — undeclared fails with code 7`, () => {
    for (
      const plugins of [
        [{ type: "x" }],
        [{ type: "x", capabilities: { [capability]: false } }],
        [{ type: "x", capabilities: { [capability]: "true" } }],
        [{ type: "x", capabilities: { other: true } }],
      ]
    ) {
      const err = throws7(
        () => planAttachments(input({ selections: [sel("n", { [key]: value }, plugins)] })),
        new RegExp(
          `^network "pod-ns/n": "${key}" was requested but no plugin declares capability "${capability}"$`,
        ),
      );
      assert.match(err.details, new RegExp(`"capabilities": \\{"${capability}": true\\}`));
    }
  });
}

Deno.test("the brief's message for ips", () => {
  throws7(
    () => planAttachments(input({ selections: [sel("name", { ips: ["10.0.0.1/24"] })] })),
    /^network "pod-ns\/name": "ips" was requested but no plugin declares capability "ips"$/,
  );
});

Deno.test("all capability keys at once; plans share no arrays/objects with the selection", () => {
  const selection: Partial<NetworkSelectionElement> = {
    ips: ["10.0.0.5/24"],
    mac: "02:00:00:00:00:01",
    "infiniband-guid": "00:11:22:33:44:55:66:77",
    portMappings: [{ hostPort: 1, containerPort: 2, protocol: "udp" }],
    bandwidth: { egressRate: 10 },
    "default-route": ["10.0.0.1"],
  };
  const [, plan] = planAttachments(
    input({ selections: [sel("n", selection, [{ type: "x", capabilities: ALL_CAPS }])] }),
  );
  assert.deepEqual(plan.capabilityArgs, {
    ips: ["10.0.0.5/24"],
    mac: "02:00:00:00:00:01",
    infinibandGUID: "00:11:22:33:44:55:66:77",
    portMappings: [{ hostPort: 1, containerPort: 2, protocol: "udp" }],
    bandwidth: { egressRate: 10 },
  });
  assert.notEqual(plan.capabilityArgs.ips, selection.ips);
  assert.notEqual((plan.capabilityArgs.portMappings as unknown[])[0], selection.portMappings![0]);
});

Deno.test("declaresCapability inspects every plugin", () => {
  assert.ok(
    declaresCapability(
      { plugins: [{ type: "a" }, { type: "b", capabilities: { mac: true } }] },
      "mac",
    ),
  );
  assert.ok(!declaresCapability({ plugins: [{ type: "a", capabilities: { mac: 1 } }] }, "mac"));
  assert.ok(!declaresCapability({ plugins: "x" }, "mac"));
  assert.ok(!declaresCapability({}, "mac"));
});

// ---------------------------------------------------------------- runtimeConfig (§7.5)

Deno.test("runtimeConfig from the runtime goes ONLY to the default network (§7.5)", () => {
  const runtimeCapabilityArgs = {
    portMappings: [{ hostPort: 80, containerPort: 8080, protocol: "tcp" }],
  };
  const plans = planAttachments(input({
    runtimeCapabilityArgs,
    defaultNetworks: [delegate("kube-system/extra", [{ type: "x", capabilities: ALL_CAPS }])],
    selections: [sel("n", {}, [{ type: "x", capabilities: ALL_CAPS }])],
  }));
  assert.deepEqual(plans[0].capabilityArgs, runtimeCapabilityArgs);
  assert.notEqual(plans[0].capabilityArgs, runtimeCapabilityArgs);
  assert.deepEqual(plans[1].capabilityArgs, {});
  assert.deepEqual(plans[2].capabilityArgs, {});
});

// ---------------------------------------------------------------- cni-args (§4.1.2.1.6)

Deno.test("cni-args are merged into every plugin's args.cni; the annotation wins", () => {
  const plugins = [
    { type: "macvlan", args: { cni: { spoofchk: "off", keep: 1 }, other: { x: 1 } } },
    { type: "tuning" },
    { type: "sbr", args: {} },
  ];
  const original = structuredClone(plugins);
  const s = sel("n", { "cni-args": { spoofchk: "on", extra: [1] } }, plugins);
  const [, plan] = planAttachments(input({ selections: [s] }));
  assert.deepEqual(plan.delegate.conflist.plugins, [
    { type: "macvlan", args: { cni: { spoofchk: "on", keep: 1, extra: [1] }, other: { x: 1 } } },
    { type: "tuning", args: { cni: { spoofchk: "on", extra: [1] } } },
    { type: "sbr", args: { cni: { spoofchk: "on", extra: [1] } } },
  ]);
  // Never mutate the input.
  assert.deepEqual(plugins, original);
  assert.deepEqual(s.delegate.conflist.plugins, original);
  assert.notEqual(plan.delegate, s.delegate);
  assert.equal(plan.delegate.statusName, "pod-ns/n");
  assert.equal(plan.delegate.conflist.cniVersion, "1.0.0", "conflist-level keys kept");
});

Deno.test("without cni-args the delegate is passed through unchanged", () => {
  const s = sel("n");
  const [, plan] = planAttachments(input({ selections: [s] }));
  assert.equal(plan.delegate, s.delegate);
  const [, empty] = planAttachments(input({ selections: [sel("n", { "cni-args": {} })] }));
  assert.deepEqual(empty.delegate.conflist.plugins, [{ type: "bridge" }]);
});

Deno.test('ipam-claim-reference is forwarded as args.cni["ipam-claim-reference"] (§4.1.2.1.11)', () => {
  const [, plan] = planAttachments(input({
    selections: [sel("n", {
      "ipam-claim-reference": "vm-a.tenantred",
      "cni-args": { "ipam-claim-reference": "ignored", a: "b" },
    })],
  }));
  assert.deepEqual(plan.delegate.conflist.plugins, [
    { type: "bridge", args: { cni: { "ipam-claim-reference": "vm-a.tenantred", a: "b" } } },
  ]);
});

Deno.test("cni-args with a non-object args or args.cni fails with code 7", () => {
  throws7(
    () =>
      planAttachments(
        input({ selections: [sel("n", { "cni-args": { a: 1 } }, [{ type: "x", args: "k=v" }])] }),
      ),
    /^network "pod-ns\/n": plugins\[0\]\.args is not an object, cannot merge "cni-args"/,
  );
  throws7(
    () =>
      planAttachments(input({
        selections: [
          sel("n", { "cni-args": { a: 1 } }, [{ type: "ok" }, { type: "x", args: { cni: [1] } }]),
        ],
      })),
    /plugins\[1\]\.args\.cni is not an object/,
  );
});

// ---------------------------------------------------------------- CNI_ARGS

Deno.test("cniArgs: K8S_POD_* and IgnoreUnknown, then runtime pairs; runtime values win", () => {
  const plans = planAttachments(input({
    runtimeArgs: [["IgnoreUnknown", "true"], ["K8S_POD_NAME", "from-runtime"], ["FOO", "bar"]],
    defaultNetworks: [delegate("kube-system/extra")],
    selections: [sel("n")],
  }));
  const expected = [
    ["IgnoreUnknown", "true"],
    ["K8S_POD_NAMESPACE", "pod-ns"],
    ["K8S_POD_NAME", "from-runtime"],
    ["K8S_POD_INFRA_CONTAINER_ID", "cid-1"],
    ["K8S_POD_UID", "uid-1"],
    ["FOO", "bar"],
  ];
  for (const plan of plans) assert.deepEqual(plan.cniArgs, expected);
  assert.notEqual(plans[0].cniArgs, plans[1].cniArgs, "not shared between plans");
});

Deno.test("cniArgs: no runtime args gives the five pod pairs", () => {
  const [plan] = planAttachments(input());
  assert.deepEqual(plan.cniArgs, [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAMESPACE", "pod-ns"],
    ["K8S_POD_NAME", "pod-a"],
    ["K8S_POD_INFRA_CONTAINER_ID", "cid-1"],
    ["K8S_POD_UID", "uid-1"],
  ]);
});

Deno.test("cniArgs: MAC= and IP= for secondaries that request them (Multus), replacing runtime ones", () => {
  const plans = planAttachments(input({
    runtimeArgs: [["IP", "10.9.9.9"]],
    selections: [
      sel("n", { mac: "02:00:00:00:00:01", ips: ["10.0.0.5/24", "fd00::5/64"] }, [{
        type: "x",
        capabilities: ALL_CAPS,
      }]),
      sel("plain"),
    ],
  }));
  assert.deepEqual(
    plans[0].cniArgs.at(-1),
    ["IP", "10.9.9.9"],
    "the default network keeps the runtime's",
  );
  assert.deepEqual(plans[1].cniArgs.slice(-2), [["MAC", "02:00:00:00:00:01"], [
    "IP",
    "10.0.0.5/24,fd00::5/64",
  ]]);
  assert.equal(plans[1].cniArgs.filter(([k]) => k === "IP").length, 1);
  assert.deepEqual(plans[2].cniArgs.at(-1), ["IP", "10.9.9.9"]);
});

Deno.test("planAttachments never mutates its input", () => {
  const i = input({
    runtimeArgs: [["A", "1"]],
    runtimeCapabilityArgs: { bandwidth: { ingressRate: 1 } },
    defaultNetworks: [delegate("kube-system/extra")],
    selections: [
      sel("n", { "cni-args": { a: 1 }, ips: ["10.0.0.1"], interface: "eth9" }, [{
        type: "x",
        capabilities: ALL_CAPS,
      }]),
    ],
  });
  const before = structuredClone(i);
  planAttachments(i);
  assert.deepEqual(i, before);
});
