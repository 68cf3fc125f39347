/**
 * Device information files (Device Information Specification v1.1.0; NPWG v1.3 §5.3.8):
 * their paths, validation, the copy from the device plugin's file to the attachment's CNI
 * file, and its removal at DEL.
 *
 * - Device-plugin file (spec §4.1):
 *   `<dir>/dp/<resourceName, "/" → "-">-<deviceID, "/" → "-">-device.json`.
 * - CNI file (spec §4.2): `<dir>/cni/<network, "/" → "-">-<containerID>_<ifName>`, unique per
 *   attachment; Multus's name, so tools that look for it find it.
 *
 * `<dir>` is Manifold's `deviceInfoDir`, default `/var/run/k8s.cni.cncf.io/devinfo`.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "../cni/errors.ts";
import { decodeJson, tuneZod } from "../cni/decode.ts";
import { errorText } from "../util/text.ts";

tuneZod(z);
/** The version Manifold writes when it builds device-info itself (sysfs discovery). */
export const DEVICE_INFO_VERSION = "1.1.0";
/** Largest device-info file read, bytes; a real one is a few hundred. */
export const MAX_DEVICE_INFO_BYTES = 64 * 1024;

/** PCI device information (spec §3.1.3); addresses in BDF form `"dddd:BB:DD.f"`. */
export interface PciDeviceInfo {
  /** The device's PCI address, BDF `"dddd:BB:DD.f"`. */
  "pci-address": string;
  /** Path of the vhost-net char device, e.g. `"/dev/vhost-net"`. */
  "vhost-net"?: string;
  /** RDMA device name, e.g. `"mlx5_3"`. */
  "rdma-device"?: string;
  /** The PF's PCI address when the device is a VF. */
  "pf-pci-address"?: string;
  /** Representor netdev of a VF, e.g. `"eth3"`. */
  "representor-device"?: string;
  /** Keys of later spec versions, kept. */
  [key: string]: unknown;
}

/** vDPA device information (spec §3.1.4). */
export interface VdpaDeviceInfo {
  /** The vDPA device as in /sys/bus/vdpa/devices, e.g. `"vdpa2"`. */
  "parent-device": string;
  /** The vDPA bus driver: `"vhost"` or `"virtio"`. */
  driver: "vhost" | "virtio";
  /** `"/dev/vhost-vdpa-0"` (vhost) or `"/sys/bus/virtio/devices/virtio3"` (virtio). */
  path: string;
  /** PCI address of the device behind the vDPA device, BDF. */
  "pci-address"?: string;
  /** The PF's PCI address when that device is a VF. */
  "pf-pci-address"?: string;
  /** Representor netdev of the VF. */
  "representor-device"?: string;
  /** Keys of later spec versions, kept. */
  [key: string]: unknown;
}

/**
 * A validated device-info map (spec §3.1): `type`, `version` and the map of that type;
 * unknown keys are kept.
 */
export interface DeviceInformation {
  /** Which map below describes the device. */
  type: "pci" | "vdpa" | "vhost-user" | "memif";
  /** `"MAJOR.MINOR.PATCH"` with major 1, e.g. `"1.1.0"`. */
  version: string;
  /** With `type: "pci"` (§3.1.3). */
  pci?: PciDeviceInfo;
  /** With `type: "vdpa"` (§3.1.4). */
  vdpa?: VdpaDeviceInfo;
  /** With `type: "vhost-user"` (§3.1.1): socket `mode` and `path`. */
  "vhost-user"?: { mode: "client" | "server"; path: string; [key: string]: unknown };
  /** With `type: "memif"` (§3.1.2): `role`, socket `path`, `mode`. */
  memif?: {
    role: "master" | "slave";
    path: string;
    mode: "ethernet" | "ip" | "inject-punt";
    [key: string]: unknown;
  };
  /** Keys of later spec versions, kept. */
  [key: string]: unknown;
}

/** `dddd:BB:DD.f`, hexadecimal (PCI bus/device/function in the kernel's `pci_name()` form). */
const PCI_ADDRESS = /^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$/;

/**
 * True for a PCI address in the kernel's BDF form `"dddd:BB:DD.f"` (device ≤ 0x1f, function ≤ 7).
 * @param s any string, e.g. a device-plugin deviceID
 * @returns whether it is a PCI address
 * @example
 * ```ts
 * isPciAddress("0000:18:02.5"); // true
 * isPciAddress("vdpa2");        // false
 * ```
 */
export function isPciAddress(s: string): boolean {
  return PCI_ADDRESS.test(s);
}

/** Built on first use: most ADDs never read a device-info file. */
function buildDeviceInfoSchema() {
  const bdf = z.string().regex(PCI_ADDRESS, 'a PCI address "dddd:BB:DD.f"');
  const text = z.string().min(1);
  const pci = z.looseObject({
    "pci-address": bdf,
    "vhost-net": text.optional(),
    "rdma-device": text.optional(),
    "pf-pci-address": bdf.optional(),
    "representor-device": text.optional(),
  });
  const vdpa = z.looseObject({
    "parent-device": text,
    driver: z.enum(["vhost", "virtio"]),
    path: z.string().startsWith("/", "an absolute path"),
    "pci-address": bdf.optional(),
    "pf-pci-address": bdf.optional(),
    "representor-device": text.optional(),
  });
  const vhostUser = z.looseObject({ mode: z.enum(["client", "server"]), path: text });
  const memif = z.looseObject({
    role: z.enum(["master", "slave"]),
    path: text,
    mode: z.enum(["ethernet", "ip", "inject-punt"]),
  });
  const version = z.string().regex(/^1\.\d+\.\d+$/, 'a version "1.MINOR.PATCH"');
  // One branch per type: the map named by "type" is required (spec §3.1.3–§3.1.6).
  return z.discriminatedUnion("type", [
    z.looseObject({ type: z.literal("pci"), version, pci }),
    z.looseObject({ type: z.literal("vdpa"), version, vdpa }),
    z.looseObject({ type: z.literal("vhost-user"), version, "vhost-user": vhostUser }),
    z.looseObject({ type: z.literal("memif"), version, memif }),
  ]);
}

let builtSchema: ReturnType<typeof buildDeviceInfoSchema> | undefined;
function deviceInfoSchema(): ReturnType<typeof buildDeviceInfoSchema> {
  return builtSchema ??= buildDeviceInfoSchema();
}

/**
 * Parses and validates a device-info document (Device Information Spec v1.1 §3): `type` one of
 * pci | vdpa | vhost-user | memif, `version` "1.x.y", the map of that type with its required
 * keys and enumerations (vdpa `driver` vhost|virtio, vhost-user `mode` client|server, memif
 * `role` master|slave and `mode` ethernet|ip|inject-punt), PCI addresses in BDF form.
 * Unknown keys are kept.
 *
 * @param text the file's contents (JSON)
 * @returns the device-info map
 * @throws {CniError} code 6 (decoding failure) when `text` is not JSON or not a valid
 *   device-info map; `details` holds the parser message or the prettified zod error
 * @example
 * ```ts
 * parseDeviceInfo('{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/run/vu.sock"}}');
 * // { type: "vhost-user", version: "1.1.0", "vhost-user": { mode: "client", path: "/run/vu.sock" } }
 * ```
 */
export function parseDeviceInfo(text: string): DeviceInformation {
  return decodeJson(
    text,
    deviceInfoSchema(),
    "device-info (Device Information Specification v1.1)",
  ) as DeviceInformation;
}

/**
 * Path of the device plugin's device-info file of one device (Device Information Spec v1.1
 * §4.1).
 * @param dir the device-info root, e.g. `"/var/run/k8s.cni.cncf.io/devinfo"`
 * @param resourceName the NAD's `k8s.v1.cni.cncf.io/resourceName`, e.g. `"intel.com/sriov"`
 * @param deviceId the device ID kubelet allocated, e.g. `"0000:18:02.5"`
 * @returns `<dir>/dp/<resourceName>-<deviceId>-device.json`, "/" replaced by "-" in both names
 * @example
 * ```ts
 * dpDeviceInfoPath("/var/run/k8s.cni.cncf.io/devinfo", "intel.com/sriov_vf", "0000:18:02.5");
 * // "/var/run/k8s.cni.cncf.io/devinfo/dp/intel.com-sriov_vf-0000:18:02.5-device.json"
 * ```
 */
export function dpDeviceInfoPath(dir: string, resourceName: string, deviceId: string): string {
  const clean = (s: string) => s.replaceAll("/", "-");
  return `${trimSlash(dir)}/dp/${clean(resourceName)}-${clean(deviceId)}-device.json`;
}

/**
 * Path of an attachment's CNI device-info file (Device Information Spec v1.1 §4.2), unique per
 * attachment: Multus's `<network>-<containerID>_<ifName>` with "/" replaced by "-".
 * @param dir the device-info root
 * @param attachment network status name (`"ns/nad"`), CNI_CONTAINERID and CNI_IFNAME
 * @returns `<dir>/cni/<name>`
 * @example
 * ```ts
 * cniDeviceInfoPath("/run/devinfo", { network: "default/sriov-net", containerId: "abc", ifName: "net1" });
 * // "/run/devinfo/cni/default-sriov-net-abc_net1"
 * ```
 */
export function cniDeviceInfoPath(
  dir: string,
  attachment: { network: string; containerId: string; ifName: string },
): string {
  const name = `${attachment.network}-${attachment.containerId}_${attachment.ifName}`;
  return `${trimSlash(dir)}/cni/${name.replaceAll("/", "-")}`;
}

/**
 * Copies the device plugin's file to the attachment's CNI file (Device Information Spec v1.1
 * §4.2.1), byte for byte, mode 0444 as Multus; the `cni/` directory is created (0755). A CNI
 * file left by an earlier attempt of the same attachment is replaced; the write is atomic
 * (temporary file + rename), so a delegate never reads half a file.
 *
 * @param from the device plugin's file ({@link dpDeviceInfoPath})
 * @param to the CNI file ({@link cniDeviceInfoPath})
 * @returns false when the device plugin wrote no file for the device (nothing copied)
 * @throws {CniError} code 5 (I/O failure) when the source cannot be read, is larger than
 *   {@link MAX_DEVICE_INFO_BYTES}, or the target cannot be written
 */
export async function copyDeviceInfoFile(from: string, to: string): Promise<boolean> {
  const data = await readLimited(from);
  if (data === undefined) return false;
  const dir = to.slice(0, to.lastIndexOf("/")) || "/";
  const temp = `${to}.tmp-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  try {
    await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
    await Deno.writeFile(temp, data, { createNew: true, mode: 0o444 });
    await Deno.chmod(temp, 0o444); // the umask may have removed bits
    await Deno.rename(temp, to);
  } catch (e) {
    await Deno.remove(temp).catch(() => {});
    throw new CniError(
      CniErrorCode.IoFailure,
      `cannot write device-info file ${to}`,
      errorText(e),
    );
  }
  return true;
}

/**
 * Reads and validates an attachment's CNI device-info file after its delegates ran
 * (Device Information Spec v1.1 §6.1.1).
 * @param path the CNI file
 * @returns the device-info, or undefined when there is no file
 * @throws {CniError} code 6 when the file is not a valid device-info document (see
 *   {@link parseDeviceInfo}); code 5 when it cannot be read or is larger than
 *   {@link MAX_DEVICE_INFO_BYTES}
 */
export async function readDeviceInfoFile(path: string): Promise<DeviceInformation | undefined> {
  const data = await readLimited(path);
  if (data === undefined) return undefined;
  return parseDeviceInfo(new TextDecoder().decode(data));
}

/**
 * Removes an attachment's CNI device-info file (DEL, Device Information Spec v1.1 §4.2.1).
 * Idempotent: a missing file is fine.
 * @param path the CNI file
 * @throws {CniError} code 5 when the file exists but cannot be removed
 */
export async function removeDeviceInfoFile(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw new CniError(
      CniErrorCode.IoFailure,
      `cannot remove device-info file ${path}`,
      errorText(e),
    );
  }
}

/** The file's bytes, undefined when it does not exist; CniError 5 when unreadable or too big. */
async function readLimited(path: string): Promise<Uint8Array | undefined> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new CniError(
      CniErrorCode.IoFailure,
      `cannot read device-info file ${path}`,
      errorText(e),
    );
  }
  try {
    const buf = new Uint8Array(MAX_DEVICE_INFO_BYTES + 1);
    let used = 0;
    while (used < buf.length) {
      const n = await file.read(buf.subarray(used));
      if (n === null) break;
      used += n;
    }
    if (used > MAX_DEVICE_INFO_BYTES) {
      throw new CniError(
        CniErrorCode.IoFailure,
        `device-info file ${path} is larger than ${MAX_DEVICE_INFO_BYTES} bytes`,
      );
    }
    return buf.slice(0, used);
  } finally {
    file.close();
  }
}

function trimSlash(dir: string): string {
  return dir.replace(/\/+$/, "") || "";
}
