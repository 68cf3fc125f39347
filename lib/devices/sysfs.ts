/**
 * Device-info discovery from sysfs, for attachments whose delegate gave a PCI or vDPA device
 * but wrote no device-info file (Device Information Spec v1.1 §3.1.3, §3.1.4):
 *
 * - a PCI device (`/sys/bus/pci/devices/<BDF>`): its address, the PF (`physfn` link), the RDMA
 *   device (`infiniband/<name>`), and `/dev/vhost-net` when the device is bound to `vfio-pci`
 *   (a DPDK workload, whose exception path uses vhost-net) and the host has vhost-net
 *   (`/sys/class/misc/vhost-net`);
 * - a vDPA device (`/sys/bus/vdpa/devices/<name>`, also found under its PCI parent): the
 *   driver (`vhost_vdpa` → "vhost", path `/dev/vhost-vdpa-N`; `virtio_vdpa` → "virtio", path
 *   `/sys/bus/virtio/devices/virtioN`) and the parent PCI device and its PF;
 * - a netdev by name (`/sys/class/net/<ifName>/device`): resolved to one of the above; a
 *   netdev without a device (veth, bridge…) has no device-info. The host's sysfs shows only
 *   the host's netdevs, so this serves sysfs views of the sandbox and tests.
 *
 * The sysfs root is an option (default `/sys`) so tests run against fixture trees; paths in the
 * result are always the canonical ones (`/dev/…`, `/sys/…`).
 *
 * @module
 */

import { DEFAULT_SYSFS_ROOT } from "./constants.ts";
import {
  DEVICE_INFO_VERSION,
  type DeviceInformation,
  isPciAddress,
  type PciDeviceInfo,
} from "./device_info.ts";

/** What is known of the attachment's device; the first usable key wins, in this order. */
export interface DeviceRef {
  /** PCI address `"dddd:BB:DD.f"`: the delegate result's `pciID`, or the allocated deviceID. */
  pciAddress?: string;
  /** vDPA device name, e.g. `"vdpa2"`. */
  vdpaDevice?: string;
  /** A netdev name as the sysfs root shows it. */
  ifName?: string;
}

/** Options of {@link discoverDeviceInfo}. */
export interface DiscoverOptions {
  /** sysfs mount point; default {@link DEFAULT_SYSFS_ROOT}. */
  sysfsRoot?: string;
}

/**
 * Builds device-info for a device from sysfs (see the module text for what is read).
 * Never throws for a missing or odd sysfs entry: what cannot be read is left out, and a device
 * sysfs does not know gives undefined.
 *
 * @param device the PCI address, vDPA device or netdev name
 * @param options the sysfs root
 * @returns `{type:"pci"|"vdpa", version:"1.1.0", …}`, or undefined when there is no such
 *   device, it is not a PCI/vDPA device, or a vDPA device is bound to no known driver
 * @example
 * ```ts
 * await discoverDeviceInfo({ pciAddress: "0000:18:02.5" });
 * // { type: "pci", version: "1.1.0",
 * //   pci: { "pci-address": "0000:18:02.5", "rdma-device": "mlx5_3", "pf-pci-address": "0000:18:00.0" } }
 * ```
 */
export async function discoverDeviceInfo(
  device: DeviceRef,
  options: DiscoverOptions = {},
): Promise<DeviceInformation | undefined> {
  const root = (options.sysfsRoot ?? DEFAULT_SYSFS_ROOT).replace(/\/+$/, "");
  if (device.pciAddress && isPciAddress(device.pciAddress)) {
    return await fromPci(root, device.pciAddress.toLowerCase());
  }
  if (device.vdpaDevice && isSafeName(device.vdpaDevice)) {
    return await fromVdpa(root, device.vdpaDevice);
  }
  if (device.ifName && isSafeName(device.ifName)) {
    const target = await realPath(`${root}/class/net/${device.ifName}/device`);
    if (!target) return undefined; // veth, bridge, macvlan…: no device
    const name = basename(target);
    if (isPciAddress(name)) return await fromPci(root, name);
    // virtio_vdpa: …/<pci>/vdpaN/virtioM is the netdev's device.
    const parent = basename(dirname(target));
    if (/^virtio\d+$/.test(name) && /^vdpa/.test(parent)) return await fromVdpa(root, parent);
    return undefined;
  }
  return undefined;
}

async function fromPci(root: string, address: string): Promise<DeviceInformation | undefined> {
  const dir = `${root}/bus/pci/devices/${address}`;
  if (!(await exists(dir))) return undefined;
  const vdpa = (await list(dir)).find((n) => /^vdpa\d+$/.test(n));
  if (vdpa) {
    const info = await fromVdpa(root, vdpa);
    if (info) return info;
  }
  const pci: PciDeviceInfo = { "pci-address": address };
  const rdma = (await list(`${dir}/infiniband`))[0];
  if (rdma) pci["rdma-device"] = rdma;
  const pf = await linkName(`${dir}/physfn`);
  if (pf && isPciAddress(pf)) pci["pf-pci-address"] = pf;
  if (
    (await linkName(`${dir}/driver`)) === "vfio-pci" &&
    (await exists(`${root}/class/misc/vhost-net`))
  ) {
    pci["vhost-net"] = "/dev/vhost-net";
  }
  return { type: "pci", version: DEVICE_INFO_VERSION, pci: orderPci(pci) };
}

async function fromVdpa(root: string, name: string): Promise<DeviceInformation | undefined> {
  const dir = `${root}/bus/vdpa/devices/${name}`;
  if (!(await exists(dir))) return undefined;
  const driverName = await linkName(`${dir}/driver`);
  const entries = await list(dir);
  let driver: "vhost" | "virtio";
  let path: string;
  if (driverName === "vhost_vdpa") {
    const dev = entries.find((n) => /^vhost-vdpa-\d+$/.test(n));
    if (!dev) return undefined;
    driver = "vhost";
    path = `/dev/${dev}`;
  } else if (driverName === "virtio_vdpa") {
    const dev = entries.find((n) => /^virtio\d+$/.test(n));
    if (!dev) return undefined;
    driver = "virtio";
    path = `/sys/bus/virtio/devices/${dev}`;
  } else {
    return undefined;
  }
  const vdpa: NonNullable<DeviceInformation["vdpa"]> = { "parent-device": name, driver, path };
  const target = await realPath(dir);
  const parent = target ? basename(dirname(target)) : "";
  if (isPciAddress(parent)) {
    vdpa["pci-address"] = parent;
    const pf = await linkName(`${root}/bus/pci/devices/${parent}/physfn`);
    if (pf && isPciAddress(pf)) vdpa["pf-pci-address"] = pf;
  }
  return { type: "vdpa", version: DEVICE_INFO_VERSION, vdpa };
}

/** Keys in the spec's order (§3.1.3) so status output is stable. */
function orderPci(p: PciDeviceInfo): PciDeviceInfo {
  const out: PciDeviceInfo = { "pci-address": p["pci-address"] };
  for (const k of ["vhost-net", "rdma-device", "pf-pci-address", "representor-device"]) {
    if (p[k] !== undefined) out[k] = p[k];
  }
  return out;
}

/** A single path component that cannot climb out of the sysfs directory it names. */
function isSafeName(s: string): boolean {
  return s !== "" && s !== "." && s !== ".." && !s.includes("/") && !s.includes("\0");
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Sorted entry names of a directory; [] when it is missing or unreadable. */
async function list(dir: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) names.push(e.name);
  } catch {
    return [];
  }
  return names.sort();
}

/** The last component of a symlink's target (`physfn` → `"0000:18:00.0"`), or undefined. */
async function linkName(path: string): Promise<string | undefined> {
  try {
    return basename(await Deno.readLink(path));
  } catch {
    return undefined;
  }
}

async function realPath(path: string): Promise<string | undefined> {
  try {
    return await Deno.realPath(path);
  } catch {
    return undefined;
  }
}

function basename(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1);
}

function dirname(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  return trimmed.slice(0, trimmed.lastIndexOf("/")) || "/";
}
