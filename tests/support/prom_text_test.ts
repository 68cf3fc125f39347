/** The strict Prometheus text parser used by the daemon's metrics tests rejects what it must. */

import assert from "node:assert/strict";
import { parsePrometheusText, sampleValue } from "./prom_text.ts";

Deno.test("prom_text: parses families, labels with escapes, histograms", () => {
  const m = parsePrometheusText(
    [
      "# HELP a_total A.",
      "# TYPE a_total counter",
      'a_total{x="q\\"\\\\\\n",y="2"} 3',
      "# TYPE h histogram",
      'h_bucket{le="1"} 1',
      'h_bucket{le="+Inf"} 2',
      "h_sum 3.5",
      "h_count 2",
      "",
    ].join("\n"),
  );
  assert.equal(sampleValue(m, "a_total", { x: 'q"\\\n', y: "2" }), 3);
  assert.equal(sampleValue(m, "h_count"), 2);
  assert.equal(m.get("a_total")?.help, "A.");
});

Deno.test("prom_text: rejects malformed expositions", () => {
  const bad = [
    "a 1", // no newline at the end
    "a 1\n", // no TYPE
    "# TYPE a gauge\na{x=1} 1\n", // unquoted
    '# TYPE a gauge\na{x="1"}1\n', // no space
    "# TYPE a gauge\na one\n",
    "# TYPE a gauge\n# TYPE a counter\n",
    "# TYPE a counter\na -1\n",
    "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na 2\n", // not contiguous
    '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_count 1\n',
    '# TYPE h histogram\nh_bucket{le="1"} 1\nh_count 1\n', // no +Inf
    '# TYPE a gauge\na{x="1",x="2"} 1\n',
  ];
  for (const text of bad) assert.throws(() => parsePrometheusText(text), Error, text);
});
