/**
 * The MultiNetworkPolicy table in force, as text for people (`manifold inspect --rules`):
 * libnftables' JSON listing ({@link readRules}) rendered close to `nft list table` — sets with
 * their elements, then each chain with its hook and policy and one line per rule (matches,
 * counter, verdict, comment). Pure.
 *
 * @module
 */

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function value(v: unknown): string {
  if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") return String(v);
  if (Array.isArray(v)) return v.map(value).join(", ");
  if (!isObj(v)) return JSON.stringify(v);
  if ("set" in v) return `{ ${value(v.set)} }`;
  if ("range" in v && Array.isArray(v.range)) return `${value(v.range[0])}-${value(v.range[1])}`;
  if ("prefix" in v && isObj(v.prefix)) return `${value(v.prefix.addr)}/${value(v.prefix.len)}`;
  if ("meta" in v && isObj(v.meta)) return `meta ${value(v.meta.key)}`;
  if ("payload" in v && isObj(v.payload)) {
    return `${value(v.payload.protocol)} ${value(v.payload.field)}`;
  }
  if ("ct" in v && isObj(v.ct)) return `ct ${value(v.ct.key)}`;
  if ("elem" in v && isObj(v.elem)) return value(v.elem.val);
  return JSON.stringify(v);
}

function expression(e: unknown): string {
  if (!isObj(e)) return JSON.stringify(e);
  const [k, body] = Object.entries(e)[0] ?? ["", null];
  if (k === "match" && isObj(body)) {
    const op = body.op === "==" || body.op === "in" ? "" : `${value(body.op)} `;
    return `${value(body.left)} ${op}${value(body.right)}`;
  }
  if (k === "counter" && isObj(body)) {
    return `counter packets ${value(body.packets)} bytes ${value(body.bytes)}`;
  }
  if (["accept", "drop", "return", "continue"].includes(k)) return k;
  if ((k === "jump" || k === "goto") && isObj(body)) return `${k} ${value(body.target)}`;
  return JSON.stringify(e);
}

/**
 * Renders a table listing as text.
 *
 * @param objects the `nftables` array of `list table` without `metainfo` ({@link readRules}),
 *   or `null` when the namespace has no table
 * @returns lines without trailing newline; `["No MultiNetworkPolicy rules."]` for `null`
 * @example
 * ```ts
 * formatRules(null); // ["No MultiNetworkPolicy rules."]
 * ```
 */
export function formatRules(objects: Record<string, unknown>[] | null): string[] {
  if (objects === null) return ["No MultiNetworkPolicy rules."];
  const out: string[] = [];
  for (const o of objects) {
    if (isObj(o.table)) out.push(`table ${value(o.table.family)} ${value(o.table.name)}`);
    else if (isObj(o.set)) {
      const s = o.set;
      const elems = Array.isArray(s.elem) && s.elem.length
        ? ` ${s.elem.map(value).join(", ")} `
        : " ";
      out.push(`  set ${value(s.name)} (${value(s.type)}): {${elems}}`);
    } else if (isObj(o.chain)) {
      const c = o.chain;
      const hook = c.hook === undefined ? "" : ` hook ${value(c.hook)} priority ${value(c.prio)}`;
      const policy = c.policy === undefined ? "" : ` policy ${value(c.policy)}`;
      out.push(`  chain ${value(c.name)}${hook}${policy}`);
    } else if (isObj(o.rule)) {
      const r = o.rule;
      const exprs = Array.isArray(r.expr) ? r.expr.map(expression).join(" ") : "";
      const comment = r.comment === undefined ? "" : ` comment "${value(r.comment)}"`;
      out.push(`    [${value(r.chain)}] ${exprs}${comment}`);
    }
  }
  return out;
}
