/**
 * Devices for multi-network attachments: which devices kubelet allocated to a pod (the
 * pod-resources gRPC API, the device-plugin checkpoint as fallback), injecting the allocated
 * device into a delegate's config, device-info files (Device Information Specification
 * v1.1.0; NPWG v1.3 §5.3.8) and discovery from sysfs.
 *
 * Devices from DRA ResourceClaims are in `dra.ts`, not exported here: lib/multinet imports it
 * only for pods that have `spec.resourceClaims`.
 *
 * Nothing heavy is loaded by this module: gRPC and the protobuf codec are imported by
 * {@link PodResourcesClient.connect}, which {@link readPodDevices} calls only when kubelet's
 * socket exists.
 *
 * @module
 */
export * from "./constants.ts";
export * from "./device_info.ts";
export * from "./checkpoint.ts";
export * from "./allocation.ts";
export * from "./inject.ts";
export * from "./sysfs.ts";
export * from "./attachment.ts";
export type { DraSource } from "./dra.ts";
export {
  POD_RESOURCES_METHODS,
  PodResourcesClient,
  type PodResourcesClientOptions,
  PodResourcesError,
} from "./pod_resources.ts";
export type { ContainerDevices, ContainerResources, PodResources } from "./pod_resources_proto.ts";
