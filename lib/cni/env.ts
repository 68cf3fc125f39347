/**
 * The CNI environment: `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`,
 * `CNI_ARGS`, `CNI_PATH` (CNI SPEC 1.1 "Parameters"), validated like libcni's skel
 * and `pkg/utils` (`ValidateContainerID`, `ValidateInterfaceName`), plus the
 * `CNI_ARGS` "K=V;K2=V2" codec (libcni `types.LoadArgs`, `invoke.Args.AsEnv`).
 *
 * @module
 */

import { CniError, CniErrorCode } from "./errors.ts";

/** Every CNI operation (CNI SPEC 1.1 "CNI operations"). */
export const CNI_COMMANDS = ["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"] as const;

/** One of {@link CNI_COMMANDS}. */
export type CniCommand = typeof CNI_COMMANDS[number];

/** The validated CNI environment of one invocation. */
export interface CniEnv {
  /** `CNI_COMMAND`: ADD, DEL, CHECK, GC, STATUS or VERSION. */
  command: CniCommand;
  /** Container ID; "" when the command does not need it (GC, STATUS, VERSION). */
  containerId: string;
  /** Netns path, e.g. `/var/run/netns/x`; may be "" for DEL, GC, STATUS, VERSION. */
  netns: string;
  /** Interface name to create inside the container, ≤ 15 bytes; "" when not needed. */
  ifName: string;
  /** Raw `CNI_ARGS`, "K=V;K2=V2" (may be ""). */
  args: string;
  /**
   * `CNI_ARGS` parsed once by {@link parseCniEnv} ({@link parseCniArgs}); absent on
   * environments built by hand (then parse `args`).
   */
  argPairs?: [string, string][];
  /** `CNI_PATH` split on ":" with empty entries removed. */
  path: string[];
}

/** Linux `IFNAMSIZ - 1`: the longest interface name in bytes (`net/core/dev.c`). */
export const MAX_INTERFACE_NAME_BYTES = 15;

const CONTAINER_ID_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

type Need = "required" | "optional" | "unused";

/** Which variables each command needs (CNI SPEC 1.1 "Parameters" per operation). */
const REQUIREMENTS: Record<
  CniCommand,
  Record<"CNI_CONTAINERID" | "CNI_NETNS" | "CNI_IFNAME" | "CNI_PATH", Need>
> = {
  ADD: {
    CNI_CONTAINERID: "required",
    CNI_NETNS: "required",
    CNI_IFNAME: "required",
    CNI_PATH: "required",
  },
  CHECK: {
    CNI_CONTAINERID: "required",
    CNI_NETNS: "required",
    CNI_IFNAME: "required",
    CNI_PATH: "required",
  },
  DEL: {
    CNI_CONTAINERID: "required",
    CNI_NETNS: "optional",
    CNI_IFNAME: "required",
    CNI_PATH: "required",
  },
  GC: {
    CNI_CONTAINERID: "unused",
    CNI_NETNS: "unused",
    CNI_IFNAME: "unused",
    CNI_PATH: "required",
  },
  STATUS: {
    CNI_CONTAINERID: "unused",
    CNI_NETNS: "unused",
    CNI_IFNAME: "unused",
    CNI_PATH: "required",
  },
  VERSION: {
    CNI_CONTAINERID: "unused",
    CNI_NETNS: "unused",
    CNI_IFNAME: "unused",
    CNI_PATH: "unused",
  },
};

/**
 * True when `s` is one of {@link CNI_COMMANDS}.
 * @example isCniCommand("ADD") // true
 */
export function isCniCommand(s: string): s is CniCommand {
  return (CNI_COMMANDS as readonly string[]).includes(s);
}

/**
 * Validates the CNI environment of one invocation. Every problem is collected into
 * ONE error naming each missing or invalid variable: required variables per command
 * (ADD/CHECK: all of CONTAINERID, NETNS, IFNAME, PATH; DEL: NETNS may be empty;
 * GC/STATUS: PATH; VERSION: only COMMAND), the container ID (libcni
 * `ValidateContainerID`), the interface name (libcni `ValidateInterfaceName`) and
 * `CNI_ARGS` syntax. Variables a command does not use are returned but not checked.
 *
 * @param env the process environment, e.g. `Deno.env.toObject()`.
 * @returns the validated environment.
 * @throws {CniError} code 4 (invalid environment variables) naming every offender in
 *   `msg`, one problem per line in `details`; also for a missing or unknown command.
 * @example
 * ```ts
 * parseCniEnv({ CNI_COMMAND: "STATUS", CNI_PATH: "/opt/cni/bin" }).path; // ["/opt/cni/bin"]
 * ```
 */
export function parseCniEnv(env: Record<string, string | undefined>): CniEnv {
  const problems: { name: string; text: string }[] = [];
  const rawCommand = env.CNI_COMMAND ?? "";
  if (rawCommand === "") {
    problems.push({ name: "CNI_COMMAND", text: "CNI_COMMAND is missing" });
  } else if (!isCniCommand(rawCommand)) {
    problems.push({
      name: "CNI_COMMAND",
      text: `CNI_COMMAND "${rawCommand}" is unknown (expected one of ${CNI_COMMANDS.join(", ")})`,
    });
  }
  const command = isCniCommand(rawCommand) ? rawCommand : undefined;
  const containerId = env.CNI_CONTAINERID ?? "";
  const netns = env.CNI_NETNS ?? "";
  const ifName = env.CNI_IFNAME ?? "";
  const args = env.CNI_ARGS ?? "";
  const pathRaw = env.CNI_PATH ?? "";
  let argPairs: [string, string][] = [];

  if (command) {
    const req = REQUIREMENTS[command];
    const values = {
      CNI_CONTAINERID: containerId,
      CNI_NETNS: netns,
      CNI_IFNAME: ifName,
      CNI_PATH: pathRaw,
    };
    for (const [name, need] of Object.entries(req)) {
      if (need === "required" && values[name as keyof typeof values] === "") {
        problems.push({ name, text: `${name} is missing` });
      }
    }
    if (req.CNI_CONTAINERID !== "unused" && containerId !== "") {
      const p = containerIdProblem(containerId);
      if (p) problems.push({ name: "CNI_CONTAINERID", text: `CNI_CONTAINERID is invalid: ${p}` });
    }
    if (req.CNI_IFNAME !== "unused" && ifName !== "") {
      const p = interfaceNameProblem(ifName);
      if (p) problems.push({ name: "CNI_IFNAME", text: `CNI_IFNAME is invalid: ${p}` });
    }
    if (command !== "VERSION" && args !== "") {
      try {
        argPairs = parseCniArgs(args);
      } catch (err) {
        const p = (err as CniError).details || (err as CniError).msg;
        problems.push({ name: "CNI_ARGS", text: `CNI_ARGS is invalid: ${p}` });
      }
    }
  }

  if (problems.length > 0) {
    const names = [...new Set(problems.map((p) => p.name))];
    throw new CniError(
      CniErrorCode.InvalidEnvironment,
      `invalid CNI environment variables [${names.join(",")}]`,
      problems.map((p) => p.text).join("\n"),
    );
  }
  return {
    command: command!,
    containerId,
    netns,
    ifName,
    args,
    argPairs,
    path: pathRaw.split(":").filter((p) => p !== ""),
  };
}

/**
 * Throws unless `id` is a valid container ID (libcni `ValidateContainerID`:
 * `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`).
 *
 * @param id the container ID.
 * @throws {CniError} code 3 (unknown container) when empty, code 4 when malformed.
 * @example
 * ```ts
 * validateContainerId("3f6940ab5ab4"); // ok
 * ```
 */
export function validateContainerId(id: string): void {
  if (id === "") throw new CniError(CniErrorCode.UnknownContainer, "missing containerID");
  const p = containerIdProblem(id);
  if (p) throw new CniError(CniErrorCode.InvalidEnvironment, p, id);
}

/**
 * Throws unless `ifName` is a valid Linux interface name (libcni
 * `ValidateInterfaceName`, kernel `dev_valid_name`): 1–15 bytes, not "." or "..",
 * no "/", ":" or whitespace.
 *
 * @param ifName the interface name, e.g. `"net1"`.
 * @throws {CniError} code 4 when invalid.
 * @example
 * ```ts
 * validateInterfaceName("net1"); // ok
 * validateInterfaceName("a/b"); // throws CniError 4
 * ```
 */
export function validateInterfaceName(ifName: string): void {
  const p = interfaceNameProblem(ifName);
  if (p) throw new CniError(CniErrorCode.InvalidEnvironment, p, ifName);
}

function containerIdProblem(id: string): string | undefined {
  if (!CONTAINER_ID_RE.test(id)) return `invalid characters in containerID "${id}"`;
  return undefined;
}

/**
 * Why `ifName` is not a valid interface name, or undefined when it is: the union of libcni
 * `ValidateInterfaceName` (1–15 bytes, not "." or "..", no "/", ":" or `unicode.IsSpace` rune —
 * JavaScript's `\s` plus U+0085) and the kernel's `dev_valid_name` (no NUL, and no byte its
 * `isspace()` accepts, which includes 0xa0: "à" is c3 a0 in UTF-8).
 *
 * @param ifName candidate name
 * @returns the problem, or undefined
 * @example interfaceNameProblem("net1") // undefined
 */
export function interfaceNameProblem(ifName: string): string | undefined {
  if (ifName === "") return "interface name is empty";
  const bytes = new TextEncoder().encode(ifName);
  if (bytes.length > MAX_INTERFACE_NAME_BYTES) {
    return `interface name "${ifName}" is ${bytes.length} bytes, at most ${MAX_INTERFACE_NAME_BYTES} allowed`;
  }
  if (ifName === "." || ifName === "..") return `interface name "${ifName}" is . or ..`;
  if (/[/:\s\u0085\0]/u.test(ifName) || bytes.includes(0xa0)) {
    return `interface name ${JSON.stringify(ifName)} contains / or : or whitespace`;
  }
  return undefined;
}

/**
 * Parses `CNI_ARGS` ("K=V;K2=V2", CNI SPEC "Parameters", libcni `types.LoadArgs`).
 * Each pair splits at its first "="; empty segments (a trailing ";") are skipped.
 *
 * @param args the raw `CNI_ARGS` value; "" yields `[]`.
 * @returns key/value pairs in order.
 * @throws {CniError} code 4 for a pair without "=" or with an empty key.
 * @example
 * ```ts
 * parseCniArgs("IgnoreUnknown=1;K8S_POD_NAME=web"); // [["IgnoreUnknown","1"],["K8S_POD_NAME","web"]]
 * ```
 */
export function parseCniArgs(args: string): [string, string][] {
  const out: [string, string][] = [];
  if (args === "") return out;
  for (const segment of args.split(";")) {
    if (segment === "") continue;
    const eq = segment.indexOf("=");
    if (eq <= 0) {
      throw new CniError(
        CniErrorCode.InvalidEnvironment,
        "invalid CNI_ARGS pair",
        `pair ${JSON.stringify(segment)} is not KEY=VALUE`,
      );
    }
    out.push([segment.slice(0, eq), segment.slice(eq + 1)]);
  }
  return out;
}

/**
 * Formats key/value pairs as `CNI_ARGS` (libcni `invoke` `stringify`).
 *
 * @param pairs key/value pairs; keys must be non-empty without "=" or ";", values
 *   without ";".
 * @returns "K=V;K2=V2" ("" for no pairs).
 * @throws {CniError} code 4 when a pair could not be parsed back.
 * @example
 * ```ts
 * formatCniArgs([["IgnoreUnknown", "1"], ["K8S_POD_NAME", "web"]]); // "IgnoreUnknown=1;K8S_POD_NAME=web"
 * ```
 */
export function formatCniArgs(pairs: [string, string][]): string {
  for (const [k, v] of pairs) {
    if (k === "" || k.includes("=") || k.includes(";") || v.includes(";")) {
      throw new CniError(
        CniErrorCode.InvalidEnvironment,
        "cannot format CNI_ARGS pair",
        `pair ${
          JSON.stringify([k, v])
        }: key must be non-empty without "=" or ";", value without ";"`,
      );
    }
  }
  return pairs.map(([k, v]) => `${k}=${v}`).join(";");
}
