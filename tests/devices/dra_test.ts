/**
 * lib/devices/dra.ts without an API: pod claims → claims → slices → Multus attributes, the
 * assignment to attachments, and every code-7 error (fake {@link DraSource}).
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import {
  assignDraDevices,
  type DraDevice,
  type DraSource,
  noDeviceError,
  podClaimNames,
  podClaimsOf,
  readDraDevices,
} from "../../lib/devices/dra.ts";
import type { ResourceClaim, ResourceSlice, SliceFilter } from "../../lib/k8s/resource.ts";

const POD = { namespace: "ns", name: "p" };
const RES = "example.com/vf";

function pod(claims: Record<string, unknown>[], statuses?: Record<string, unknown>[]) {
  return podClaimsOf({
    metadata: { name: "p", namespace: "ns" },
    spec: { nodeName: "n1", resourceClaims: claims },
    status: statuses ? { resourceClaimStatuses: statuses } : {},
  })!;
}

function fake(
  claims: Record<string, ResourceClaim>,
  slices: ResourceSlice[],
  seen: SliceFilter[] = [],
): DraSource {
  return {
    claim: (_ns, name) => Promise.resolve(claims[name]),
    slices: (f) => {
      seen.push(f);
      return Promise.resolve(slices.filter((s) => s.driver === f.driver));
    },
  };
}

function allocated(name: string, devices: [driver: string, device: string][]): ResourceClaim {
  return {
    name,
    namespace: "ns",
    allocated: true,
    results: devices.map(([driver, device]) => ({ request: "r", driver, pool: "n1", device })),
  };
}

function attrs(deviceId?: string, resourceName: string | undefined = RES) {
  const a: Record<string, { string: string }> = {};
  if (deviceId) a["k8s.cni.cncf.io/deviceID"] = { string: deviceId };
  if (resourceName) a["k8s.cni.cncf.io/resourceName"] = { string: resourceName };
  return a;
}

function slice(driver: string, generation: number, devices: [string, object][]): ResourceSlice {
  return {
    name: `${driver}-${generation}`,
    driver,
    pool: "n1",
    generation,
    nodeName: "n1",
    devices: devices.map(([name, attributes]) => ({ name, attributes } as never)),
  };
}

function code7(re: RegExp) {
  return (e: unknown) => e instanceof CniError && e.code === 7 && re.test(e.msg);
}

Deno.test("podClaimsOf: no claims → undefined; template names from the status; bad shape → 6", () => {
  assert.equal(podClaimsOf({ metadata: { name: "p", namespace: "ns" }, spec: {} }), undefined);
  const p = pod(
    [{ name: "a", resourceClaimName: "a-claim" }, { name: "b", resourceClaimTemplateName: "t" }, {
      name: "c",
      resourceClaimTemplateName: "t",
    }],
    [{ name: "b", resourceClaimName: "p-b-xyz" }, { name: "c", resourceClaimName: null }],
  );
  assert.equal(p.nodeName, "n1");
  assert.deepEqual(podClaimNames(p, ["ns/vf"]), ["a-claim", "p-b-xyz"]);
  assert.throws(
    () => podClaimsOf({ metadata: { name: "p", namespace: "ns" }, spec: { resourceClaims: [{}] } }),
    (e: unknown) => e instanceof CniError && e.code === 6,
  );
  assert.throws(
    () => podClaimNames(pod([{ name: "b", resourceClaimTemplateName: "t" }]), ["ns/vf"]),
    code7(/pod ns\/p: claim "b" \(template t\) is not generated yet.*ns\/vf/),
  );
});

Deno.test("readDraDevices: claim then result order; GPU and unpublished devices skipped; newest pool generation", async () => {
  const seen: SliceFilter[] = [];
  const source = fake({
    c1: allocated("c1", [["gpu.example.com", "gpu-0"], ["vf.example.com", "vf-2"]]),
    c2: allocated("c2", [["vf.example.com", "vf-1"], ["vf.example.com", "ghost"]]),
  }, [
    slice("gpu.example.com", 1, [["gpu-0", { model: { string: "a100" } }]]),
    slice("vf.example.com", 1, [["vf-1", attrs("0000:00:00.9")]]), // stale generation
    slice("vf.example.com", 2, [["vf-1", attrs("0000:18:02.1")], ["vf-2", attrs("0000:18:02.2")]]),
  ], seen);
  const devices = await readDraDevices(
    pod([{ name: "x", resourceClaimName: "c1" }, { name: "y", resourceClaimName: "c2" }]),
    { source, nads: ["ns/vf"] },
  );
  assert.deepEqual(devices, [
    { claim: "c1", request: "r", device: "gpu.example.com/n1/gpu-0" },
    {
      claim: "c1",
      request: "r",
      device: "vf.example.com/n1/vf-2",
      resourceName: RES,
      deviceId: "0000:18:02.2",
    },
    {
      claim: "c2",
      request: "r",
      device: "vf.example.com/n1/vf-1",
      resourceName: RES,
      deviceId: "0000:18:02.1",
    },
  ]);
  assert.deepEqual(seen.map((f) => [f.driver, f.nodeName]).sort(), [
    ["gpu.example.com", "n1"],
    ["vf.example.com", "n1"],
  ]);
});

Deno.test("readDraDevices: a bare attribute name counts in the driver's own domain", async () => {
  const source = fake({ c: allocated("c", [["k8s.cni.cncf.io", "d0"]]) }, [
    slice("k8s.cni.cncf.io", 1, [["d0", {
      deviceID: { string: "0000:18:02.3" },
      resourceName: { string: RES },
    }]]),
  ]);
  const [d] = await readDraDevices(pod([{ name: "x", resourceClaimName: "c" }]), {
    source,
    nads: [],
  });
  assert.equal(d.deviceId, "0000:18:02.3");
  assert.equal(d.resourceName, RES);
});

Deno.test("readDraDevices: missing or unallocated claim → 7 naming pod, claim, NADs; source errors keep their code", async () => {
  const p = pod([{ name: "x", resourceClaimName: "c" }]);
  await assert.rejects(
    readDraDevices(p, { source: fake({}, []), nads: ["ns/vf"] }),
    code7(/pod ns\/p: ResourceClaim ns\/c does not exist.*ns\/vf/),
  );
  await assert.rejects(
    readDraDevices(p, {
      source: fake({ c: { name: "c", namespace: "ns", allocated: false, results: [] } }, []),
      nads: ["ns/vf", "ns/vf2"],
    }),
    code7(/ResourceClaim ns\/c is not allocated yet, so no device can be given to ns\/vf, ns\/vf2/),
  );
  const failing: DraSource = {
    claim: () => Promise.reject(new CniError(11, "API unreachable")),
    slices: () => Promise.resolve([]),
  };
  await assert.rejects(
    readDraDevices(p, { source: failing, nads: ["ns/vf"] }),
    (e: unknown) =>
      e instanceof CniError && e.code === 11 &&
      e.msg === "pod ns/p: cannot read ResourceClaim c: API unreachable",
  );
});

const VF = (n: number, id?: string, resourceName: string | null = RES): DraDevice => ({
  claim: "c",
  request: "r",
  device: `d/n1/vf-${n}`,
  ...(resourceName ? { resourceName } : {}),
  ...(id ? { deviceId: id } : {}),
});

Deno.test("assignDraDevices: one device per attachment in order; other resources undefined", () => {
  const got = assignDraDevices(POD, {
    attachments: [
      { statusName: "ns/a", resourceName: RES },
      { statusName: "ns/legacy", resourceName: "example.com/legacy" },
      { statusName: "ns/b", resourceName: RES },
    ],
    devices: [VF(1, "0000:18:02.1"), VF(9, undefined, null), VF(2, "0000:18:02.2")],
  });
  assert.deepEqual(got.map((d) => d?.deviceId), ["0000:18:02.1", undefined, "0000:18:02.2"]);
});

Deno.test("assignDraDevices: competing attachments and a device without deviceID → 7", () => {
  assert.throws(
    () =>
      assignDraDevices(POD, {
        attachments: [
          { statusName: "ns/a", resourceName: RES },
          { statusName: "ns/b", resourceName: RES },
        ],
        devices: [VF(1, "0000:18:02.1")],
      }),
    code7(
      /pod ns\/p: 2 attachments \(ns\/a, ns\/b\) compete for 1 device of resource "example\.com\/vf" \(d\/n1\/vf-1 of ResourceClaim c\)/,
    ),
  );
  assert.throws(
    () =>
      assignDraDevices(POD, {
        attachments: [{ statusName: "ns/a", resourceName: RES }],
        devices: [VF(1)],
      }),
    code7(
      /device d\/n1\/vf-1 of ResourceClaim c \(request r\) serves resource "example\.com\/vf" of ns\/a but has no k8s\.cni\.cncf\.io\/deviceID attribute/,
    ),
  );
});

Deno.test("noDeviceError: names pod, resource, NAD, claims and what was allocated", () => {
  const e = noDeviceError(POD, {
    attachment: { statusName: "ns/a", resourceName: RES },
    devices: [VF(1, "0000:18:02.1", "example.com/other"), VF(2, undefined, null)],
    claims: ["c"],
  });
  assert.equal(e.code, 7);
  assert.match(
    e.msg,
    /pod ns\/p: no allocated device matches resource "example\.com\/vf" of ns\/a \(ResourceClaims: c/,
  );
  assert.match(e.details, /d\/n1\/vf-1 of ResourceClaim c \(resource "example\.com\/other"\)/);
  assert.match(e.details, /d\/n1\/vf-2 of ResourceClaim c \(no k8s\.cni\.cncf\.io\/resourceName\)/);
});
