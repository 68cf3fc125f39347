/**
 * Every fuzz target, by name, with its bounded CI batch. Used by `tests/fuzz/fuzz_test.ts`
 * (bounded batch) and `scripts/fuzz.ts` (millions of cases).
 *
 * @module
 */

import type { FuzzTarget } from "../support/fuzz.ts";
import { cniArgsTarget } from "./cni_args.ts";
import { configTarget } from "./config.ts";
import { manifoldConfTarget, netconfTarget, recordTarget } from "./fast_checks.ts";
import {
  k8sObjectsTarget,
  kubeconfigShapeTarget,
  resultShapeTarget,
  selectionShapeTarget,
} from "./fast_checks_api.ts";
import { netlinkApiTarget, netlinkTarget } from "./netlink.ts";
import { resultTarget } from "./result.ts";
import { selectionTarget } from "./selection.ts";
import { statusTarget } from "./status.ts";

/** A target and how many cases CI runs (sized for ≈ 1 s each on a 2-core box). */
export interface TargetEntry {
  /** The target. */
  // deno-lint-ignore no-explicit-any
  target: FuzzTarget<any, any>;
  /** Cases per CI run. */
  ciRuns: number;
}

/** The targets in the order `--target all` runs them. */
export const TARGETS: Readonly<Record<string, TargetEntry>> = {
  selection: { target: selectionTarget, ciRuns: 4000 },
  config: { target: configTarget, ciRuns: 4000 },
  netconf: { target: netconfTarget, ciRuns: 4000 },
  manifoldconf: { target: manifoldConfTarget, ciRuns: 4000 },
  record: { target: recordTarget, ciRuns: 3000 },
  resultshape: { target: resultShapeTarget, ciRuns: 3000 },
  selectionshape: { target: selectionShapeTarget, ciRuns: 3000 },
  k8sobjects: { target: k8sObjectsTarget, ciRuns: 3000 },
  kubeconfigshape: { target: kubeconfigShapeTarget, ciRuns: 3000 },
  cniargs: { target: cniArgsTarget, ciRuns: 20000 },
  result: { target: resultTarget, ciRuns: 3000 },
  netlink: { target: netlinkTarget, ciRuns: 10000 },
  "netlink-api": { target: netlinkApiTarget, ciRuns: 5000 },
  status: { target: statusTarget, ciRuns: 3000 },
};

/** The default seed of CI runs (fixed, so CI is reproducible; `FUZZ_SEED` overrides it). */
export const DEFAULT_SEED = 0x5eed;
