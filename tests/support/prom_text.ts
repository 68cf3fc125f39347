/**
 * A strict parser of the Prometheus text exposition format 0.0.4, for tests: every line is a
 * `# HELP`, a `# TYPE`, a comment, blank, or a sample `name{label="value",…} value [ts]`; a
 * family's TYPE comes before its samples and at most once; a histogram's samples are
 * `_bucket` (with `le`), `_sum` and `_count`, buckets cumulative and ending at `+Inf` = count.
 * Anything else throws with the line number.
 *
 * @module
 */

/** One sample line. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One metric family: its TYPE, HELP and samples. */
export interface Family {
  type: "counter" | "gauge" | "histogram" | "summary" | "untyped";
  help?: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function parseValue(s: string, where: string): number {
  if (s === "+Inf") return Infinity;
  if (s === "-Inf") return -Infinity;
  // Prometheus parses values with Go's strconv.ParseFloat, which takes NaN in any case;
  // prom-client writes "Nan" (lib/util.js getValueAsString).
  if (/^nan$/i.test(s)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) {
    throw new Error(`${where}: bad value "${s}"`);
  }
  return Number(s);
}

function parseLabels(s: string, where: string): [Record<string, string>, number] {
  // s starts after "{"; returns labels and the index after "}".
  const labels: Record<string, string> = {};
  let i = 0;
  while (s[i] !== "}") {
    const eq = s.indexOf("=", i);
    if (eq < 0) throw new Error(`${where}: label without "="`);
    const name = s.slice(i, eq);
    if (!LABEL.test(name)) throw new Error(`${where}: bad label name "${name}"`);
    if (name in labels) throw new Error(`${where}: duplicate label "${name}"`);
    if (s[eq + 1] !== '"') throw new Error(`${where}: label value not quoted`);
    let j = eq + 2;
    let v = "";
    for (;;) {
      const c = s[j];
      if (c === undefined) throw new Error(`${where}: unterminated label value`);
      if (c === '"') break;
      if (c === "\\") {
        const n = s[j + 1];
        if (n === "n") v += "\n";
        else if (n === "\\" || n === '"') v += n;
        else throw new Error(`${where}: bad escape "\\${n}"`);
        j += 2;
      } else {
        v += c;
        j++;
      }
    }
    labels[name] = v;
    i = j + 1;
    if (s[i] === ",") i++;
    else if (s[i] !== "}") throw new Error(`${where}: expected "," or "}" after a label`);
  }
  return [labels, i + 1];
}

function familyOf(name: string, families: Map<string, Family>): string | undefined {
  if (families.has(name)) return name;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    const base = name.endsWith(suffix) ? name.slice(0, -suffix.length) : undefined;
    const t = base === undefined ? undefined : families.get(base)?.type;
    if (t === "histogram" || (t === "summary" && suffix !== "_bucket")) return base;
  }
  return undefined;
}

/**
 * Parses an exposition strictly.
 *
 * @param text the `/metrics` body
 * @returns the families by name
 * @throws Error naming the line for any deviation
 */
export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const closed = new Set<string>();
  let current: string | undefined;
  if (!text.endsWith("\n")) throw new Error("exposition does not end with a newline");
  const lines = text.slice(0, -1).split("\n");
  lines.forEach((line, n) => {
    const where = `line ${n + 1}`;
    if (line === "") return;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a plain comment
      const [, kind, name, rest] = m;
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name "${name}"`);
      if (closed.has(name)) throw new Error(`${where}: ${name} declared after its samples`);
      const f = families.get(name) ?? { type: "untyped" as const, samples: [] };
      if (kind === "TYPE") {
        if (families.get(name)?.type !== undefined && families.get(name)?.type !== "untyped") {
          throw new Error(`${where}: second TYPE for ${name}`);
        }
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(rest)) {
          throw new Error(`${where}: bad type "${rest}"`);
        }
        f.type = rest as Family["type"];
      } else {
        if (f.help !== undefined) throw new Error(`${where}: second HELP for ${name}`);
        f.help = rest;
      }
      families.set(name, f);
      return;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{?)/.exec(line);
    if (!m) throw new Error(`${where}: not a sample: ${line}`);
    const name = m[1];
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (m[2] === "{") {
      const [l, end] = parseLabels(rest.slice(1), where);
      labels = l;
      rest = rest.slice(1 + end);
    }
    const parts = rest.split(" ");
    if (parts[0] !== "" || parts.length < 2 || parts.length > 3) {
      throw new Error(`${where}: expected " value [timestamp]": ${line}`);
    }
    const value = parseValue(parts[1], where);
    if (parts[2] !== undefined && !/^-?\d+$/.test(parts[2])) throw new Error(`${where}: bad ts`);
    const fam = familyOf(name, families);
    if (fam === undefined) throw new Error(`${where}: sample ${name} before its TYPE`);
    if (current !== fam) {
      if (closed.has(fam)) throw new Error(`${where}: samples of ${fam} not contiguous`);
      if (current !== undefined) closed.add(current);
      current = fam;
    }
    const f = families.get(fam)!;
    if (name.endsWith("_bucket") && f.type === "histogram" && !("le" in labels)) {
      throw new Error(`${where}: bucket without le`);
    }
    if (f.type === "counter" && !(value >= 0)) throw new Error(`${where}: negative counter`);
    f.samples.push({ name, labels, value });
  });
  for (const [name, f] of families) if (f.type === "histogram") checkHistogram(name, f);
  return families;
}

function checkHistogram(name: string, f: Family): void {
  const key = (l: Record<string, string>) =>
    JSON.stringify(Object.entries(l).filter(([k]) => k !== "le").sort());
  const series = new Map<string, { les: number[]; counts: number[]; count?: number }>();
  for (const s of f.samples) {
    const k = key(s.labels);
    const e = series.get(k) ?? { les: [], counts: [] };
    if (s.name === `${name}_bucket`) {
      e.les.push(parseValue(s.labels.le, `${name} le`));
      e.counts.push(s.value);
    } else if (s.name === `${name}_count`) e.count = s.value;
    series.set(k, e);
  }
  for (const [k, e] of series) {
    for (let i = 1; i < e.les.length; i++) {
      if (!(e.les[i] > e.les[i - 1]) || e.counts[i] < e.counts[i - 1]) {
        throw new Error(`${name}${k}: buckets not cumulative`);
      }
    }
    if (e.les.at(-1) !== Infinity || e.counts.at(-1) !== e.count) {
      throw new Error(`${name}${k}: +Inf bucket missing or not equal to _count`);
    }
  }
}

/**
 * The value of one sample, by name and exact labels.
 *
 * @param fams parsed families
 * @param name sample name (`x_total`, `x_bucket`, `x_count`)
 * @param labels every label of the sample
 * @returns its value, or undefined when absent
 */
export function sampleValue(
  fams: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const want = JSON.stringify(Object.entries(labels).sort());
  for (const f of fams.values()) {
    for (const s of f.samples) {
      if (s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want) {
        return s.value;
      }
    }
  }
  return undefined;
}
