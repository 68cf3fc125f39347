/**
 * CNI results of every version (decoding, conversion between versions): lib/cni/result_convert.ts
 * with zod's schemas loaded (lib/cni/result_schemas.ts), so every call validates synchronously
 * and a malformed result is reported in zod's words. The per-call path imports
 * result_convert.ts instead and loads the schemas only for a result the fast checks do not
 * accept (issue 30).
 *
 * @module
 */

import "./result_schemas.ts";

export * from "./result_convert.ts";
