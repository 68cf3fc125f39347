/**
 * The CNI error type. Its JSON form *is* the wire format a plugin prints on stdout
 * when it fails: `{"cniVersion","code","msg","details"}` (CNI SPEC "Error").
 *
 * @module
 */

/**
 * Well-known CNI error codes (CNI SPEC 1.1 "Error", codes 0-99 reserved; 999 is
 * libcni/skel's ErrInternal for anything unexpected).
 */
export const CniErrorCode = {
  /** Incompatible CNI version. */
  IncompatibleVersion: 1,
  /** Unsupported field in network configuration. */
  UnsupportedField: 2,
  /** Container unknown or does not exist. */
  UnknownContainer: 3,
  /** Invalid necessary environment variables, like CNI_COMMAND, CNI_CONTAINERID. */
  InvalidEnvironment: 4,
  /** I/O failure, e.g. failed to read the network config bytes from stdin. */
  IoFailure: 5,
  /** Failed to decode content, e.g. unmarshal a network config or prevResult. */
  DecodingFailure: 6,
  /** Invalid network config: some validation failed. */
  InvalidNetworkConfig: 7,
  /** The network namespace is invalid or cannot be entered (libcni `types.ErrInvalidNetNS`). */
  InvalidNetns: 8,
  /** Try again later: a transient condition (API unreachable, resource busy). */
  TryAgainLater: 11,
  /** STATUS: the plugin is not available, no new ADD should be attempted. */
  PluginNotAvailable: 50,
  /** STATUS: not available and existing containers may have limited connectivity. */
  PluginNotAvailableLimited: 51,
  /** Internal error: anything not covered above (skel's ErrInternal). */
  Internal: 999,
} as const;

/** One of {@link CniErrorCode}'s values, or a plugin-specific code ≥ 100. */
export type CniErrorCodeValue = number;

/** Wire shape of a CNI error (CNI SPEC "Error"). */
export interface CniErrorJson {
  /** The cniVersion of the request (CNI SPEC "Error"). */
  cniVersion: string;
  /** The CNI error code (1–99 the spec's, 100+ the plugin's). */
  code: number;
  /** Short message. */
  msg: string;
  /** Longer explanation, when any. */
  details?: string;
}

/**
 * An error that carries a CNI error code. Throw it wherever the spec gives a code;
 * the dispatcher (`lib/cni/skel.ts`) prints it with {@link CniError.toJSON} and maps
 * every other exception to code 999.
 *
 * @example
 * ```ts
 * const err = new CniError(CniErrorCode.InvalidNetworkConfig, "missing type", "plugins[1]");
 * err.toJSON("1.1.0"); // {cniVersion:"1.1.0",code:7,msg:"missing type",details:"plugins[1]"}
 * ```
 */
export class CniError extends Error {
  /** CNI error code (see {@link CniErrorCode}). */
  readonly code: CniErrorCodeValue;
  /** The short message (`msg` on the wire). */
  readonly msg: string;
  /** Longer free-form context (`details` on the wire); "" when none. */
  readonly details: string;

  /**
   * A CNI error as the spec's error object (CNI SPEC "Error").
   *
   * @param code CNI error code, e.g. `CniErrorCode.InvalidNetworkConfig` (7).
   * @param msg sentence-case message without a trailing period.
   * @param details optional longer explanation (zod issues, child stderr…).
   */
  constructor(code: CniErrorCodeValue, msg: string, details = "") {
    super(details ? `${msg}: ${details}` : msg);
    this.name = "CniError";
    this.code = code;
    this.msg = msg;
    this.details = details;
  }

  /**
   * Returns a copy whose `msg` is prefixed with context, e.g. `[ns/pod:net-a]`,
   * keeping code and details.
   */
  withContext(context: string): CniError {
    const err = new CniError(this.code, `${context} ${this.msg}`, this.details);
    err.stack = this.stack;
    return err;
  }

  /**
   * The wire JSON for this error.
   * @param cniVersion the version the caller asked for (from the stdin config), or
   *   the newest supported version when it is unknown.
   */
  toJSON(cniVersion = "1.1.0"): CniErrorJson {
    const out: CniErrorJson = { cniVersion, code: this.code, msg: this.msg };
    if (this.details) out.details = this.details;
    return out;
  }
}

/**
 * Turns any thrown value into a {@link CniError}: a CniError is returned as is,
 * anything else becomes code 999 with its message.
 */
export function toCniError(err: unknown): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof Error) {
    return new CniError(CniErrorCode.Internal, err.message, err.stack ?? "");
  }
  return new CniError(CniErrorCode.Internal, String(err));
}
