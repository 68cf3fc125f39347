/**
 * Checks of CNI SPEC 1.1 "GC" for a delegating plugin, run as a runtime runs GC: two pods on
 * the default network and one NAD (both configs cniVersion 1.1.0, so GC is forwarded to their
 * plugins — libcni's `GCNetworkList` forwards only to ≥ 1.1.0 configs); the runtime deletes one
 * pod's sandbox (its netns, and with it the interfaces: "the plugin MAY assume that the
 * isolation domain … has been deleted"), then calls GC listing the other pod's attachments in
 * `cni.dev/valid-attachments`. GC is not DEL: nothing is asserted about interfaces of the
 * deleted netns; what is asserted is what GC is for —
 *
 * - MUST (SPEC §GC "Plugins MUST … forward any GC calls to delegated plugins", §4): every
 *   network of the stale attachments reaches its delegates, either as a DEL of that attachment
 *   or as a GC whose valid attachments leave it out; the listed attachments get no DEL, are
 *   not left out of a GC, and keep their interfaces;
 * - SHOULD (§GC "a plugin should remove any IPAM reservations associated with attachments not
 *   in the provided list"): the stale attachments' host-local leases are released and the
 *   listed ones' kept.
 *
 * The recording delegate does a 1.1.0 GC as host-local does (conformance/recorder.ts), so a GC
 * that reaches it with the runtime's list releases the leases. The verdicts are pure functions
 * of what was observed ({@link gcForwardProblems}, {@link gcLeaseProblems}).
 *
 * @module
 */

import {
  calls,
  type Check,
  expect,
  expectOk,
  networks,
  RUNTIME_ONLY,
  said,
  Skip,
  supported,
  withPod,
} from "./check.ts";
import type { PodRun, Suite } from "./harness.ts";
import type { Recording } from "./recorder.ts";

/** One attachment as GC names it, with the network whose delegates hold it. */
export interface GcAttachment {
  containerID: string;
  ifname: string;
  /** The network's `name` (what its delegates get as `name`). */
  network: string;
}

/** The valid attachments a recorded GC carried (`cni.dev/valid-attachments`, or the draft key). */
function validOf(r: Recording): { containerID?: string; ifname?: string }[] {
  const v = r.config["cni.dev/valid-attachments"] ?? r.config["cni.dev/attachments"] ?? [];
  return Array.isArray(v) ? v : [];
}

function listed(r: Recording, a: GcAttachment): boolean {
  return validOf(r).some((v) => v.containerID === a.containerID && v.ifname === a.ifname);
}

/**
 * What is wrong with how a GC reached the delegates.
 * @param recs the delegate calls recorded from the GC on (any container).
 * @param stale attachments the runtime left out of `cni.dev/valid-attachments`.
 * @param kept attachments it listed.
 * @returns one line per problem; `[]` when GC was forwarded as the spec requires.
 * @example
 * ```ts
 * const a = { containerID: "c1", ifname: "eth0", network: "def" };
 * gcForwardProblems([], [a], []); // ['def (c1/eth0): its delegates got neither DEL nor GC']
 * ```
 */
export function gcForwardProblems(
  recs: Recording[],
  stale: GcAttachment[],
  kept: GcAttachment[],
): string[] {
  const problems: string[] = [];
  const dels = (a: GcAttachment) =>
    recs.filter((r) =>
      r.env.CNI_COMMAND === "DEL" && r.config.name === a.network &&
      r.env.CNI_CONTAINERID === a.containerID && r.env.CNI_IFNAME === a.ifname
    );
  const gcs = (a: GcAttachment) =>
    recs.filter((r) => r.env.CNI_COMMAND === "GC" && r.config.name === a.network);
  for (const a of stale) {
    const what = `${a.network} (${a.containerID.slice(0, 12)}/${a.ifname})`;
    if (dels(a).length > 0 || gcs(a).some((r) => !listed(r, a))) continue;
    problems.push(
      gcs(a).length > 0
        ? `${what}: its delegates' GC listed the stale attachment as valid, and it got no DEL`
        : `${what}: its delegates got neither DEL nor GC`,
    );
  }
  for (const a of kept) {
    const what = `${a.network} (${a.containerID.slice(0, 12)}/${a.ifname})`;
    if (dels(a).length > 0) problems.push(`${what}: a listed attachment got DEL`);
    if (gcs(a).some((r) => !listed(r, a))) {
      problems.push(`${what}: a GC of its delegates left the listed attachment out`);
    }
  }
  return problems;
}

/** A host-local lease: the file's network directory and the attachment it holds. */
export interface Lease {
  network: string;
  address: string;
  containerID: string;
  ifname: string;
}

/**
 * What is wrong with the host-local leases after GC.
 * @param leases every lease left in the IPAM data dir.
 * @param stale, kept as for {@link gcForwardProblems}.
 * @returns one line per problem; `[]` when the stale leases are gone and the kept ones stay.
 */
export function gcLeaseProblems(
  leases: Lease[],
  stale: GcAttachment[],
  kept: GcAttachment[],
): string[] {
  const of = (a: GcAttachment) =>
    leases.filter((l) =>
      l.network === a.network && l.containerID === a.containerID && l.ifname === a.ifname
    );
  return [
    ...stale.filter((a) => of(a).length > 0).map((a) =>
      `${a.network} (${a.ifname}): stale lease ${of(a).map((l) => l.address)} not released`
    ),
    ...kept.filter((a) => of(a).length === 0).map((a) =>
      `${a.network} (${a.ifname}): the listed attachment's lease was released`
    ),
  ];
}

/** Every host-local lease under `dataDir` (`<dataDir>/<network>/<address>`). */
export async function leasesIn(dataDir: string): Promise<Lease[]> {
  const out: Lease[] = [];
  for await (const n of Deno.readDir(dataDir)) {
    if (!n.isDirectory) continue;
    for await (const f of Deno.readDir(`${dataDir}/${n.name}`)) {
      if (!f.isFile || f.name === "lock" || f.name.startsWith("last_reserved_ip")) continue;
      const [id, ifname] = (await Deno.readTextFile(`${dataDir}/${n.name}/${f.name}`))
        .split(/\r?\n/);
      out.push({
        network: n.name,
        address: f.name,
        containerID: id.trim(),
        ifname: (ifname ?? "").trim(),
      });
    }
  }
  return out;
}

/** What one GC scenario observed. */
interface GcObserved {
  recs: Recording[];
  leases: Lease[];
  stale: GcAttachment[];
  kept: GcAttachment[];
  /** Interfaces in the kept pod's netns before GC, and after. */
  keptLinks: string[];
  keptLinksAfter: string[];
}

const GC_DEFAULT = "conformance-gc-default";
const GC_NET = "gc-net";

/** Runs the GC scenario of the module doc and hands what it saw to `judge`. */
async function gcScenario(s: Suite, judge: (o: GcObserved) => void): Promise<void> {
  if (!(await supported(s)).includes("1.1.0")) throw new Skip("VERSION does not list 1.1.0");
  // A cache, a default network and leases of their own: earlier checks may leave attachments
  // whose DEL keeps failing, and GC is judged by what is left.
  const dir = await Deno.makeTempDir({ dir: s.base, prefix: "gc-" });
  const ipamDir = `${dir}/ipam`;
  const clusterNetwork = await s.defaultNetwork(
    `${dir}/net`,
    s.defaultConflist({ cniVersion: "1.1.0", name: GC_DEFAULT, ipamDir }),
  );
  const net = s.net({ name: GC_NET, cniVersion: "1.1.0" });
  (net.ipam as Record<string, unknown>).dataDir = ipamDir;
  const pod = {
    cniVersion: "1.1.0",
    annotations: networks([{ name: GC_NET, interface: "gc1" }]),
    nads: { [GC_NET]: net },
    conf: { cniDir: `${dir}/cni`, clusterNetwork },
  };
  // The attachments as the delegates got them on ADD (network name, CNI_IFNAME).
  const attachments = async (p: PodRun): Promise<GcAttachment[]> => {
    const seen = new Map<string, GcAttachment>();
    for (const r of calls(await p.records(), "ADD")) {
      const a = { containerID: p.containerId, ifname: r.env.CNI_IFNAME, network: r.config.name };
      if (typeof a.network === "string") seen.set(`${a.network}\0${a.ifname}`, a as GcAttachment);
    }
    return [...seen.values()];
  };
  await withPod(s, pod, (keep) =>
    withPod(s, pod, async (gone) => {
      expectOk(await keep.call("ADD"), "ADD of the pod that stays");
      expectOk(await gone.call("ADD"), "ADD of the pod that goes");
      const [kept, stale, keptLinks] = [
        await attachments(keep),
        await attachments(gone),
        await keep.links(),
      ];
      for (const [what, as] of [["stays", kept], ["goes", stale]] as const) {
        const nets = as.map((a) => a.network);
        expect(
          nets.includes(GC_DEFAULT) && nets.includes(GC_NET),
          `the pod that ${what} was not attached to ${GC_DEFAULT} and ${GC_NET}: ${nets}`,
        );
      }
      await gone.deleteNetns();
      const mark = Date.now();
      const gc = await gone.call("GC", {
        config: {
          ...gone.conf,
          "cni.dev/valid-attachments": kept.map(({ containerID, ifname }) => ({
            containerID,
            ifname,
          })),
        },
        omit: RUNTIME_ONLY,
      });
      expect(gc.code === 0, `GC: ${said(gc)}`);
      judge({
        recs: await gone.recordsSince(mark),
        leases: await leasesIn(ipamDir),
        stale,
        kept,
        keptLinks,
        keptLinksAfter: await keep.links(),
      });
    }));
}

/** CNI SPEC 1.1 GC checks. */
export const GC_CHECKS: Check[] = [
  {
    section: "CNI §GC",
    name: "GC (1.1.0): stale attachments' delegates get GC or DEL; valid ones are kept",
    level: "MUST",
    run: (s) =>
      gcScenario(s, (o) => {
        const problems = gcForwardProblems(o.recs, o.stale, o.kept);
        expect(problems.length === 0, problems.join("; "));
        const missing = o.keptLinks.filter((i) => !o.keptLinksAfter.includes(i));
        expect(missing.length === 0, `the listed pod lost ${missing} in GC`);
      }),
  },
  {
    section: "CNI §GC",
    name: "GC (1.1.0): stale attachments' IPAM leases are released, valid ones kept",
    level: "SHOULD",
    run: (s) =>
      gcScenario(s, (o) => {
        const problems = gcLeaseProblems(o.leases, o.stale, o.kept);
        expect(problems.length === 0, problems.join("; "));
      }),
  },
];
