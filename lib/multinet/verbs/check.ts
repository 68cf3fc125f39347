/**
 * CHECK for the delegating plugin (CNI SPEC "CHECK"): every cached attachment is
 * checked by its delegates with the cached prevResult.
 *
 * @module
 */

import { CniError, CniErrorCode, toCniError } from "../../cni/errors.ts";
import { parseNetworkConfig } from "../../cni/netconf.ts";
import { supportsCheck } from "../../cni/version.ts";
import type { ManifoldDeps } from "../deps.ts";
import { attachmentContext, podRefFromArgs } from "../plan/pod.ts";
import { parseCniArgs } from "../../cni/env.ts";
import { claimsSandboxInterface } from "../status/kernel.ts";
import { type DecodedResult, decodeResult } from "../../cni/result_convert.ts";
import { withResultSchemas } from "../../cni/result_codecs.ts";

/**
 * A cached result, decoded once; a result that does not decode is kept as the error, which
 * fails the delegate CHECK (code 6/1) — the kernel check then treats it as claiming nothing.
 */
async function decodeCached(raw: unknown): Promise<{ value?: DecodedResult; error?: CniError }> {
  if (raw === undefined || raw === null) return {};
  try {
    return { value: await withResultSchemas(() => decodeResult(raw)) };
  } catch (e) {
    return { error: toCniError(e) };
  }
}

/**
 * Runs CHECK for one sandbox.
 * @throws {CniError} 3 when Manifold holds no attachments for the container (never added, or
 *   deleted); the first failing delegate's error prefixed with `[ns/pod:net]`.
 */
export async function cmdCheck(deps: ManifoldDeps): Promise<void> {
  const { env } = deps;
  const pod = podRefFromArgs(env.argPairs ?? parseCniArgs(env.args), env.containerId);
  const record = await deps.cache.read(env.containerId, env.ifName);
  if (!record || record.deletedAt) {
    throw new CniError(
      CniErrorCode.UnknownContainer,
      `no attachments are known for container ${env.containerId}`,
    );
  }
  // Each cached result decoded once: the delegates' prevResult and the kernel check share it.
  const results: (DecodedResult | undefined)[] = [];
  for (const a of record.attachments) {
    const decoded = await decodeCached(a.result);
    results.push(decoded.value);
    const list = parseNetworkConfig(a.conflist, { source: `cache:${a.statusName}` });
    if (!supportsCheck(list.cniVersion)) {
      // CHECK came with 0.4.0; older delegates cannot be asked (Multus #525 failed the pod instead).
      deps.logger.debug("delegate predates CHECK, skipped", {
        network: a.statusName,
        cniVersion: list.cniVersion,
      });
      continue;
    }
    if (a.state !== "added") {
      throw new CniError(
        CniErrorCode.UnknownContainer,
        `${attachmentContext(pod, a.statusName)} attachment ${a.ifName} never completed its ADD`,
      );
    }
    if (decoded.error) throw decoded.error.withContext(attachmentContext(pod, a.statusName));
    try {
      await deps.runtime.checkNetworkList(list, {
        containerId: env.containerId,
        netns: env.netns,
        ifName: a.ifName,
        args: a.cniArgs,
        capabilityArgs: a.capabilityArgs,
      }, decoded.value);
    } catch (e) {
      throw toCniError(e).withContext(attachmentContext(pod, a.statusName));
    }
  }
  if (!deps.kernel || !env.netns) return;
  // Kernel truth: every interface a delegate created must still be there, with the MAC published.
  const snapshot = await deps.kernel.inspect(env.netns);
  for (const [i, a] of record.attachments.entries()) {
    if (!claimsSandboxInterface(results[i]?.result, a.ifName)) continue;
    const iface = snapshot.interfaces.find((x) => x.name === a.ifName);
    if (!iface) {
      throw new CniError(
        CniErrorCode.Internal,
        `${attachmentContext(pod, a.statusName)} interface ${a.ifName} is missing from the sandbox`,
        `netns ${env.netns} holds: ${snapshot.interfaces.map((x) => x.name).join(", ")}`,
      );
    }
    const published = record.networkStatus?.[i]?.mac;
    if (published && iface.mac && published.toLowerCase() !== iface.mac.toLowerCase()) {
      throw new CniError(
        CniErrorCode.Internal,
        `${
          attachmentContext(pod, a.statusName)
        } interface ${a.ifName} has MAC ${iface.mac}, published ${published}`,
      );
    }
  }
}
