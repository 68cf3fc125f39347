/**
 * The kubelet device manager's checkpoint file
 * (`/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`), read as the fallback when
 * the pod-resources API is unavailable (Multus `pkg/checkpoint`).
 *
 * Shape (kubelet `checkpoint.Data`): `{"Data": {"PodDeviceEntries": [{"PodUID",
 * "ContainerName", "ResourceName", "DeviceIDs", "AllocResp"}], "RegisteredDevices": {…}},
 * "Checksum": n}`. `DeviceIDs` is `{"<NUMA node>": ["id", …]}` since Kubernetes 1.20 and
 * `["id", …]` before; Go writes empty lists as `null`.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "../cni/errors.ts";
import { decodeJson, tuneZod } from "../cni/decode.ts";
import { errorText } from "../util/text.ts";

tuneZod(z);

/** Largest checkpoint read, bytes (a busy node's is a few hundred KiB). */
const MAX_CHECKPOINT_BYTES = 32 * 1024 * 1024;

function buildCheckpointSchema() {
  const ids = z.array(z.string()).nullish();
  return z.looseObject({
    Data: z.looseObject({
      PodDeviceEntries: z.array(z.looseObject({
        PodUID: z.string(),
        ContainerName: z.string().nullish(),
        ResourceName: z.string(),
        DeviceIDs: z.union([ids, z.record(z.string(), ids)]),
      })).nullish(),
    }),
  });
}

let builtSchema: ReturnType<typeof buildCheckpointSchema> | undefined;
function checkpointSchema(): ReturnType<typeof buildCheckpointSchema> {
  return builtSchema ??= buildCheckpointSchema();
}

/**
 * The device IDs a pod holds according to the checkpoint text, by resource name, over all
 * its containers; each list sorted (code-point order) without duplicates.
 *
 * @param text the checkpoint file's contents
 * @param podUid the pod's UID (K8S_POD_UID)
 * @returns resource name → device IDs; `{}` when the pod holds no device
 * @throws {CniError} code 6 (decoding failure) when the text is not a checkpoint
 * @example
 * ```ts
 * parseCheckpointDevices(JSON.stringify({ Data: { PodDeviceEntries: [
 *   { PodUID: "u1", ContainerName: "c", ResourceName: "intel.com/sriov",
 *     DeviceIDs: { "0": ["0000:18:02.5", "0000:18:02.3"] } },
 * ] } }), "u1");
 * // { "intel.com/sriov": ["0000:18:02.3", "0000:18:02.5"] }
 * ```
 */
export function parseCheckpointDevices(text: string, podUid: string): Record<string, string[]> {
  const data = decodeJson(text, checkpointSchema(), "device-plugin checkpoint");
  const byResource = new Map<string, Set<string>>();
  for (const entry of data.Data.PodDeviceEntries ?? []) {
    if (entry.PodUID !== podUid) continue;
    const ids = Array.isArray(entry.DeviceIDs)
      ? entry.DeviceIDs
      : Object.values(entry.DeviceIDs ?? {}).flatMap((l) => l ?? []);
    const set = byResource.get(entry.ResourceName) ?? new Set();
    for (const id of ids) set.add(id);
    byResource.set(entry.ResourceName, set);
  }
  return Object.fromEntries([...byResource].map(([name, set]) => [name, [...set].sort()]));
}

/**
 * Reads the checkpoint file and returns the pod's devices ({@link parseCheckpointDevices}).
 * @param path the checkpoint file, e.g. `"/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"`
 * @param podUid the pod's UID
 * @returns resource name → sorted device IDs, or undefined when the file does not exist
 * @throws {CniError} code 5 when the file cannot be read or is larger than 32 MiB; code 6
 *   when it is not a checkpoint
 */
export async function readCheckpointDevices(
  path: string,
  podUid: string,
): Promise<Record<string, string[]> | undefined> {
  let text: string;
  try {
    const info = await Deno.stat(path);
    if (info.size > MAX_CHECKPOINT_BYTES) {
      throw new CniError(CniErrorCode.IoFailure, `device-plugin checkpoint ${path} is too large`);
    }
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    if (e instanceof CniError) throw e;
    throw new CniError(
      CniErrorCode.IoFailure,
      `cannot read device-plugin checkpoint ${path}`,
      errorText(e),
    );
  }
  return parseCheckpointDevices(text, podUid);
}
