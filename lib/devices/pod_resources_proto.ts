/**
 * Protobuf wire codec of the messages Manifold uses from the kubelet pod-resources API
 * (`k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`, package `v1`), on the wire layer of
 * `@bufbuild/protobuf`. Decoders read the fields below and skip the others (cpu_ids, memory,
 * dynamic_resources, …); encoders exist for the test server and write the same fields.
 *
 * ```proto
 * message GetPodResourcesRequest  { string pod_name = 1; string pod_namespace = 2; }
 * message GetPodResourcesResponse { PodResources pod_resources = 1; }
 * message ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
 * message AllocatableResourcesResponse { repeated ContainerDevices devices = 1; }
 * message PodResources { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }
 * message ContainerResources { string name = 1; repeated ContainerDevices devices = 2; }
 * message ContainerDevices { string resource_name = 1; repeated string device_ids = 2; TopologyInfo topology = 3; }
 * message TopologyInfo { repeated NUMANode nodes = 1; }
 * message NUMANode { int64 ID = 1; }
 * ```
 *
 * Decoders throw the wire layer's `Error` on malformed bytes; the client turns it into a CNI
 * error.
 *
 * @module
 */

import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** `ContainerDevices`: one resource's devices in a container. */
export interface ContainerDevices {
  /** e.g. `"intel.com/sriov_netdevice"`. */
  resourceName: string;
  /** Device-plugin IDs, e.g. PCI addresses `"0000:18:02.5"`; as kubelet lists them. */
  deviceIds: string[];
  /** NUMA nodes of the devices (`TopologyInfo.nodes[].ID`), when kubelet reports them. */
  numaNodes?: number[];
}

/** `ContainerResources`: a container and its devices. */
export interface ContainerResources {
  /** Container name. */
  name: string;
  /** Devices assigned to the container, per resource. */
  devices: ContainerDevices[];
}

/** `PodResources`: a pod (namespace/name) and its containers' devices. */
export interface PodResources {
  /** Pod name. */
  name: string;
  /** Pod namespace. */
  namespace: string;
  /** The pod's containers. */
  containers: ContainerResources[];
}

/** `GetPodResourcesRequest`. */
export interface GetPodResourcesRequest {
  podName: string;
  podNamespace: string;
}

/**
 * Encodes `GetPodResourcesRequest`.
 * @param req pod name and namespace
 * @returns the message bytes
 * @example
 * ```ts
 * encodeGetPodResourcesRequest({ podName: "p", podNamespace: "ns" }); // Uint8Array [10, 1, 112, 18, 2, 110, 115]
 * ```
 */
export function encodeGetPodResourcesRequest(req: GetPodResourcesRequest): Uint8Array {
  const w = new BinaryWriter();
  if (req.podName) w.tag(1, WireType.LengthDelimited).string(req.podName);
  if (req.podNamespace) w.tag(2, WireType.LengthDelimited).string(req.podNamespace);
  return w.finish();
}

/**
 * Decodes `GetPodResourcesRequest` (test server side).
 * @param bytes the message
 * @returns pod name and namespace ("" when absent)
 * @throws {Error} on malformed bytes
 */
export function decodeGetPodResourcesRequest(bytes: Uint8Array): GetPodResourcesRequest {
  const out: GetPodResourcesRequest = { podName: "", podNamespace: "" };
  readFields(bytes, (no, r, type) => {
    if (no === 1 && type === WireType.LengthDelimited) out.podName = r.string();
    else if (no === 2 && type === WireType.LengthDelimited) out.podNamespace = r.string();
    else return false;
    return true;
  });
  return out;
}

/**
 * Decodes `GetPodResourcesResponse`.
 * @param bytes the message
 * @returns the pod's resources, or undefined when the field is absent
 * @throws {Error} on malformed bytes
 */
export function decodeGetPodResourcesResponse(bytes: Uint8Array): PodResources | undefined {
  let pod: PodResources | undefined;
  readFields(bytes, (no, r, type) => {
    if (no !== 1 || type !== WireType.LengthDelimited) return false;
    pod = decodePodResources(r.bytes());
    return true;
  });
  return pod;
}

/**
 * Encodes `GetPodResourcesResponse` (test server side).
 * @param pod the pod's resources, or undefined for an empty response
 * @returns the message bytes
 */
export function encodeGetPodResourcesResponse(pod: PodResources | undefined): Uint8Array {
  const w = new BinaryWriter();
  if (pod) w.tag(1, WireType.LengthDelimited).bytes(encodePodResources(pod));
  return w.finish();
}

/**
 * Decodes `ListPodResourcesResponse`.
 * @param bytes the message
 * @returns every pod on the node
 * @throws {Error} on malformed bytes
 */
export function decodeListPodResourcesResponse(bytes: Uint8Array): PodResources[] {
  const pods: PodResources[] = [];
  readFields(bytes, (no, r, type) => {
    if (no !== 1 || type !== WireType.LengthDelimited) return false;
    pods.push(decodePodResources(r.bytes()));
    return true;
  });
  return pods;
}

/**
 * Encodes `ListPodResourcesResponse` (test server side).
 * @param pods the pods
 * @returns the message bytes
 */
export function encodeListPodResourcesResponse(pods: PodResources[]): Uint8Array {
  const w = new BinaryWriter();
  for (const p of pods) w.tag(1, WireType.LengthDelimited).bytes(encodePodResources(p));
  return w.finish();
}

/**
 * Decodes `AllocatableResourcesResponse` (devices only).
 * @param bytes the message
 * @returns the node's allocatable devices
 * @throws {Error} on malformed bytes
 */
export function decodeAllocatableResourcesResponse(bytes: Uint8Array): ContainerDevices[] {
  const devices: ContainerDevices[] = [];
  readFields(bytes, (no, r, type) => {
    if (no !== 1 || type !== WireType.LengthDelimited) return false;
    devices.push(decodeContainerDevices(r.bytes()));
    return true;
  });
  return devices;
}

/**
 * Encodes `AllocatableResourcesResponse` (devices only; test server side).
 * @param devices the devices
 * @returns the message bytes
 */
export function encodeAllocatableResourcesResponse(devices: ContainerDevices[]): Uint8Array {
  const w = new BinaryWriter();
  for (const d of devices) w.tag(1, WireType.LengthDelimited).bytes(encodeContainerDevices(d));
  return w.finish();
}

function decodePodResources(bytes: Uint8Array): PodResources {
  const pod: PodResources = { name: "", namespace: "", containers: [] };
  readFields(bytes, (no, r, type) => {
    if (type !== WireType.LengthDelimited) return false;
    if (no === 1) pod.name = r.string();
    else if (no === 2) pod.namespace = r.string();
    else if (no === 3) pod.containers.push(decodeContainerResources(r.bytes()));
    else return false;
    return true;
  });
  return pod;
}

function encodePodResources(pod: PodResources): Uint8Array {
  const w = new BinaryWriter();
  if (pod.name) w.tag(1, WireType.LengthDelimited).string(pod.name);
  if (pod.namespace) w.tag(2, WireType.LengthDelimited).string(pod.namespace);
  for (const c of pod.containers) {
    w.tag(3, WireType.LengthDelimited).bytes(encodeContainerResources(c));
  }
  return w.finish();
}

function decodeContainerResources(bytes: Uint8Array): ContainerResources {
  const c: ContainerResources = { name: "", devices: [] };
  readFields(bytes, (no, r, type) => {
    if (type !== WireType.LengthDelimited) return false;
    if (no === 1) c.name = r.string();
    else if (no === 2) c.devices.push(decodeContainerDevices(r.bytes()));
    else return false;
    return true;
  });
  return c;
}

function encodeContainerResources(c: ContainerResources): Uint8Array {
  const w = new BinaryWriter();
  if (c.name) w.tag(1, WireType.LengthDelimited).string(c.name);
  for (const d of c.devices) w.tag(2, WireType.LengthDelimited).bytes(encodeContainerDevices(d));
  return w.finish();
}

function decodeContainerDevices(bytes: Uint8Array): ContainerDevices {
  const d: ContainerDevices = { resourceName: "", deviceIds: [] };
  readFields(bytes, (no, r, type) => {
    if (type !== WireType.LengthDelimited) return false;
    if (no === 1) d.resourceName = r.string();
    else if (no === 2) d.deviceIds.push(r.string());
    else if (no === 3) d.numaNodes = decodeTopology(r.bytes());
    else return false;
    return true;
  });
  return d;
}

function encodeContainerDevices(d: ContainerDevices): Uint8Array {
  const w = new BinaryWriter();
  if (d.resourceName) w.tag(1, WireType.LengthDelimited).string(d.resourceName);
  for (const id of d.deviceIds) w.tag(2, WireType.LengthDelimited).string(id);
  if (d.numaNodes) {
    const t = new BinaryWriter();
    for (const id of d.numaNodes) {
      const n = new BinaryWriter();
      if (id !== 0) n.tag(1, WireType.Varint).int64(id);
      t.tag(1, WireType.LengthDelimited).bytes(n.finish());
    }
    w.tag(3, WireType.LengthDelimited).bytes(t.finish());
  }
  return w.finish();
}

/** `TopologyInfo` → the NUMA node IDs. */
function decodeTopology(bytes: Uint8Array): number[] {
  const nodes: number[] = [];
  readFields(bytes, (no, r, type) => {
    if (no !== 1 || type !== WireType.LengthDelimited) return false;
    let id = 0;
    readFields(r.bytes(), (n, rr, t) => {
      if (n !== 1 || t !== WireType.Varint) return false;
      id = Number(rr.int64());
      return true;
    });
    nodes.push(id);
    return true;
  });
  return nodes;
}

/**
 * Walks the fields of one message; `onField` reads a field it knows and returns true, or
 * returns false to have it skipped.
 */
function readFields(
  bytes: Uint8Array,
  onField: (no: number, r: BinaryReader, type: WireType) => boolean,
): void {
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, type] = r.tag();
    if (!onField(no, r, type)) r.skip(type, no);
  }
}
