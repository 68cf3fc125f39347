/**
 * Names and default paths of the device integration, without dependencies, so that
 * configuration parsing and planning can use them without loading the device modules.
 *
 * @module
 */

/** Root of the device-info files (Device Information Spec v1.1 §4). */
export const DEFAULT_DEVICE_INFO_DIR = "/var/run/k8s.cni.cncf.io/devinfo";
/** The CNI capability whose runtimeConfig value is the CNI device-info file (spec §5.1). */
export const DEVICE_INFO_CAPABILITY = "CNIDeviceInfoFile";
/** The runtimeConfig key carrying the allocated device ID (Multus, SR-IOV CNI). */
export const DEVICE_ID_CAPABILITY = "deviceID";
/** Where kubelet serves the pod-resources gRPC API by default. */
export const DEFAULT_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock";
/** Default bound on one pod-resources call, ms. */
export const DEFAULT_POD_RESOURCES_TIMEOUT_MS = 5_000;
/** Where kubelet keeps the device manager's checkpoint by default. */
export const DEFAULT_DEVICE_CHECKPOINT_FILE =
  "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";
/** Where sysfs is mounted by default. */
export const DEFAULT_SYSFS_ROOT = "/sys";
