/**
 * Putting an allocated device into a delegate's configuration, as Multus does
 * (`LoadDelegateNetConf`): `deviceID` in every plugin of the conflist, and `pciBusID` too when
 * the ID is a PCI address (the key older SR-IOV CNI releases read).
 *
 * @module
 */

import { DEVICE_ID_CAPABILITY } from "./constants.ts";
import { isPciAddress } from "./device_info.ts";

/**
 * A copy of the conflist with `deviceID` (and `pciBusID` for a PCI address) set in every
 * plugin; the input is never mutated. Entries of `plugins` that are not objects are kept as
 * they are (config validation reports them).
 *
 * @param conflist a delegate's conflist object (`{cniVersion, name, plugins: […]}`)
 * @param deviceId the allocated device ID, e.g. `"0000:18:02.5"`
 * @returns the new conflist
 * @example
 * ```ts
 * injectDeviceId({ name: "n", plugins: [{ type: "sriov" }, { type: "tuning" }] }, "0000:18:02.5");
 * // { name: "n", plugins: [
 * //   { type: "sriov", deviceID: "0000:18:02.5", pciBusID: "0000:18:02.5" },
 * //   { type: "tuning", deviceID: "0000:18:02.5", pciBusID: "0000:18:02.5" } ] }
 * ```
 */
export function injectDeviceId(
  conflist: Record<string, unknown>,
  deviceId: string,
): Record<string, unknown> {
  const plugins = conflist.plugins;
  if (!Array.isArray(plugins)) return { ...conflist };
  const extra: Record<string, string> = { deviceID: deviceId };
  if (isPciAddress(deviceId)) extra.pciBusID = deviceId;
  return {
    ...conflist,
    plugins: plugins.map((p: unknown) =>
      typeof p === "object" && p !== null && !Array.isArray(p) ? { ...p, ...extra } : p
    ),
  };
}

/**
 * A delegate given its device, as ADD gives it and a cache-less DEL gives it back: the conflist
 * with the ID injected ({@link injectDeviceId}) and runtimeConfig `deviceID` among the
 * capability arguments (CNI CONVENTIONS "Device ID"; reaches plugins declaring it). Inputs are
 * not mutated.
 * @param conflist the delegate's conflist object
 * @param capabilityArgs the attachment's runtimeConfig candidates
 * @param deviceId the device, e.g. `"0000:18:02.5"`
 * @returns the new conflist and capability arguments
 * @example
 * ```ts
 * withDevice({ plugins: [{ type: "sriov" }] }, {}, "0000:18:02.5").capabilityArgs;
 * // { deviceID: "0000:18:02.5" }
 * ```
 */
export function withDevice(
  conflist: Record<string, unknown>,
  capabilityArgs: Record<string, unknown>,
  deviceId: string,
): { conflist: Record<string, unknown>; capabilityArgs: Record<string, unknown> } {
  return {
    conflist: injectDeviceId(conflist, deviceId),
    capabilityArgs: { ...capabilityArgs, [DEVICE_ID_CAPABILITY]: deviceId },
  };
}
