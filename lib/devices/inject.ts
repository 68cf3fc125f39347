/**
 * Putting an allocated device into a delegate's configuration, as Multus does
 * (`LoadDelegateNetConf`): `deviceID` in every plugin of the conflist, and `pciBusID` too when
 * the ID is a PCI address (the key older SR-IOV CNI releases read).
 *
 * @module
 */

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
