/**
 * The device-info steps around one attachment's delegate ADD (Device Information Spec v1.1
 * §4.2.1, §5.1.1, §6.1.1; NPWG v1.3 §5.3.8):
 *
 * 1. before: {@link prepareDeviceInfoFile} copies the device plugin's file of the allocated
 *    device to the attachment's CNI file and says which path to pass as runtimeConfig
 *    `CNIDeviceInfoFile` (to every plugin declaring the capability, with or without a device
 *    plugin, e.g. vhost-user or memif CNIs that write the file themselves);
 * 2. after: {@link collectDeviceInfo} reads and validates that file, or, when there is none
 *    and the delegate gave a PCI device (result `pciID`, or the allocated device ID),
 *    discovers the device from sysfs.
 *
 * @module
 */

import {
  cniDeviceInfoPath,
  copyDeviceInfoFile,
  type DeviceInformation,
  dpDeviceInfoPath,
  isPciAddress,
  readDeviceInfoFile,
  removeDeviceInfoFile,
} from "./device_info.ts";
import { discoverDeviceInfo } from "./sysfs.ts";

/** Input of {@link prepareDeviceInfoFile}. */
export interface PrepareDeviceInfoInput {
  /** Status name of the network, `"ns/nad"`. */
  network: string;
  /** CNI_CONTAINERID. */
  containerId: string;
  /** CNI_IFNAME of the attachment. */
  ifName: string;
  /** The NAD's resource name, when the network is backed by a device plugin. */
  resourceName?: string;
  /** The device allocated to this attachment. */
  deviceId?: string;
  /** True when a plugin of the delegate declares the `CNIDeviceInfoFile` capability. */
  declaresCapability: boolean;
  /** The device-info root (Manifold `deviceInfoDir`). */
  deviceInfoDir: string;
}

/**
 * Prepares the attachment's CNI device-info file. With a resource and device ID, the device
 * plugin's file is copied there (when the device plugin wrote one); otherwise a file left by an
 * earlier attempt of the same attachment is removed, so that only what this ADD's delegates
 * write is reported.
 *
 * @param input the attachment (see {@link PrepareDeviceInfoInput})
 * @returns the CNI file path when a plugin declares the capability or a file was copied
 *   (pass it as `CNIDeviceInfoFile`, read it after ADD, remove it at DEL); else undefined
 * @throws {CniError} code 5 when a file cannot be read, written or removed
 */
export async function prepareDeviceInfoFile(
  input: PrepareDeviceInfoInput,
): Promise<string | undefined> {
  const path = cniDeviceInfoPath(input.deviceInfoDir, input);
  let copied = false;
  if (input.resourceName && input.deviceId) {
    const from = dpDeviceInfoPath(input.deviceInfoDir, input.resourceName, input.deviceId);
    copied = await copyDeviceInfoFile(from, path);
  }
  if (!copied) await removeDeviceInfoFile(path);
  return copied || input.declaresCapability ? path : undefined;
}

/** Input of {@link collectDeviceInfo}. */
export interface CollectDeviceInfoInput {
  /** The CNI file from {@link prepareDeviceInfoFile}, if any. */
  deviceInfoFile?: string;
  /** The device allocated to the attachment, if any. */
  deviceId?: string;
  /** The delegate's raw result (any version); its interfaces' `pciID` (CNI 1.1) is used. */
  result?: unknown;
  /** CNI_IFNAME of the attachment: the `pciID` of that sandbox interface is preferred. */
  ifName: string;
  /** sysfs root (Manifold `sysfsRoot`). */
  sysfsRoot: string;
}

/**
 * The attachment's device-info: the CNI file when it exists, else what sysfs says of the PCI
 * or vDPA device the delegate gave (`pciID` of the result's interface named `ifName`, of its
 * first interface with one, or the allocated device ID when it is a PCI address or a vDPA
 * device name).
 *
 * @param input file, device, result, sysfs root
 * @returns the device-info, or undefined when there is neither a file nor a known device
 * @throws {CniError} code 6 when the file is not a valid device-info document; code 5 when it
 *   cannot be read
 */
export async function collectDeviceInfo(
  input: CollectDeviceInfoInput,
): Promise<DeviceInformation | undefined> {
  if (input.deviceInfoFile) {
    const fromFile = await readDeviceInfoFile(input.deviceInfoFile);
    if (fromFile) return fromFile;
  }
  const pciId = resultPciId(input.result, input.ifName);
  const id = input.deviceId;
  if (pciId) return await discoverDeviceInfo({ pciAddress: pciId }, input);
  if (id && isPciAddress(id)) return await discoverDeviceInfo({ pciAddress: id }, input);
  if (id && /^vdpa\d+$/.test(id)) return await discoverDeviceInfo({ vdpaDevice: id }, input);
  return undefined;
}

/**
 * The `pciID` (CNI SPEC 1.1 "Result" `interfaces[].pciID`) of the result's interface named
 * `ifName`, else of its first interface that has one.
 * @param result a delegate's raw result
 * @param ifName the attachment's interface name
 * @returns a PCI address, or undefined
 * @example
 * ```ts
 * resultPciId({ interfaces: [{ name: "net1", pciID: "0000:18:02.5" }] }, "net1"); // "0000:18:02.5"
 * ```
 */
export function resultPciId(result: unknown, ifName: string): string | undefined {
  if (typeof result !== "object" || result === null) return undefined;
  const interfaces = (result as { interfaces?: unknown }).interfaces;
  if (!Array.isArray(interfaces)) return undefined;
  const ids = interfaces
    .filter((i): i is { name?: unknown; pciID: string } =>
      typeof i === "object" && i !== null && typeof i.pciID === "string" && isPciAddress(i.pciID)
    );
  return (ids.find((i) => i.name === ifName) ?? ids[0])?.pciID;
}
