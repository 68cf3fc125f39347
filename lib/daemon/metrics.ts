/**
 * The daemon's Prometheus metrics: one private `prom-client` registry and the
 * {@link DaemonObserver} that feeds it. Loaded by `manifold daemon` only (through
 * `lib/daemon/http.ts`); nothing on the plugin's per-call path imports this module, so the
 * plugin and the forwarder never pay for `prom-client`.
 *
 * Series (Prometheus text format 0.0.4):
 * - `manifold_cni_requests_total{command,result}` counter: CNI requests served by the daemon;
 * - `manifold_cni_request_duration_seconds{command}` histogram: their wall time;
 * - `manifold_delegate_duration_seconds{plugin,command}` histogram: delegate executions;
 * - `manifold_api_requests_total{verb,code}` counter: Kubernetes API requests (code 0 = no answer);
 * - `manifold_attachments` gauge: live attachments in the cache;
 * - `manifold_policy_sync_duration_seconds` histogram and
 *   `manifold_policy_apply_failures_total{reason}` counter: MultiNetworkPolicy syncs
 *   (`"multiNetworkPolicy": true`), reason `apply_failed` | `remove_failed` | `sync_failed` |
 *   `no_sandbox` (observer.ts {@link PolicyFailureReason}; every reason exported from 0);
 * - `manifold_hotplug_changes_total{op,result}` counter and
 *   `manifold_hotplug_change_duration_seconds{result}` histogram: hot-plug (`"hotPlug": true`),
 *   op `add` | `remove` | `change`, result `success` | `error` | `refused`;
 * - `manifold_accept_errors_total` counter: failed `accept(2)` calls on the daemon socket
 *   (out of descriptors: the server backs off);
 * - `manifold_status_publish_lag_seconds` histogram and `manifold_status_pending` gauge:
 *   `"statusPublish": "async"` — time from ADD queueing a network-status to its write, and
 *   statuses queued and not yet written;
 * - `manifold_fallback_total` counter: in-process fallbacks of the forwarder, the line count
 *   of the fallbacks file at scrape time;
 * - `manifold_events_total{type,reason}` counter: Kubernetes events the daemon posted (after the
 *   `events` policy), e.g. `Warning`/`TeardownAbandoned`, `Warning`/`ErrorAddingNetwork`;
 * - prom-client's default process metrics without a prefix (`process_cpu_seconds_total`,
 *   `process_start_time_seconds`, `nodejs_heap_size_used_bytes`, …), the names every Prometheus
 *   client library exports, so stock node/process dashboards work; except the series prom-client
 *   reads from `/proc/self` ({@link PROC_SELF_SERIES}), which Deno opens only with
 *   `--allow-all` (the daemon runs with scripts/permissions, so they would read 0):
 *   `process_resident_memory_bytes` comes from `Deno.memoryUsage()` instead, the others are left
 *   out, but `process_open_fds` and `process_max_fds`, counted through libc (process_fds.ts);
 *   and the `nodejs_eventloop_lag_*` series, the same but sampled by loop_delay.ts (Deno's
 *   `monitorEventLoopDelay`, which prom-client uses, held 10–18 MiB of the daemon's RSS); and
 *   without prom-client's three gauges named like counters ({@link LINT_FAILING_SERIES}:
 *   `promtool check metrics` rejects them; their per-type series stay).
 *
 * @module
 */

import { Counter, DEFAULT_METRICS, Gauge, Histogram, Registry } from "./prom.ts";
import { type LoopLagSampler, registerEventLoopLag } from "./loop_delay.ts";
import {
  type DaemonObserver,
  POLICY_FAILURE_REASONS,
  type PolicyFailureReason,
} from "./observer.ts";
import { maxFds, openFds } from "./process_fds.ts";
import { LineCounter } from "./line_counter.ts";

export { countLines, LineCounter } from "./line_counter.ts";

/** Histogram buckets in seconds, for CNI requests and delegates: 5 ms … 60 s. */
export const DURATION_BUCKETS: readonly number[] = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
];

/**
 * prom-client's gauges whose `_total` suffix `promtool check metrics` rejects ("non-counter metrics
 * should not have _total suffix"); the same counts by type (`nodejs_active_handles{type}`, …)
 * stay, and their sum is what these held.
 */
export const LINT_FAILING_SERIES: readonly string[] = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/**
 * prom-client's series read from `/proc/self/status`, `/proc/self/fd` and `/proc/self/limits`:
 * Deno refuses those reads without `--allow-all` ("NotCapable") and prom-client then reports 0.
 */
export const PROC_SELF_SERIES: readonly string[] = [
  "process_resident_memory_bytes",
  "process_virtual_memory_bytes",
  "process_heap_bytes",
  "process_open_fds",
  "process_max_fds",
];

/** The CNI commands kept as label values; any other value is reported as `"other"`. */
const COMMANDS = new Set(["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"]);
/** The HTTP methods kept as label values; any other value is reported as `"other"`. */
const VERBS = new Set(["GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE", "HEAD"]);

/** The daemon's metrics: a private registry (never prom-client's global one) and its observer. */
export interface DaemonMetrics {
  /** Records into the registry; label values are bounded (see module doc). */
  readonly observer: DaemonObserver;
  /** The exposition's media type (`text/plain; version=0.0.4; charset=utf-8`). */
  readonly contentType: string;
  /**
   * Every series in Prometheus text format, collected now (reads the fallbacks file).
   *
   * @throws what a collector throws, e.g. Deno.errors.PermissionDenied on the fallbacks file
   */
  scrape(): Promise<string>;
  /** Unregisters every series (stops the default collectors' state); idempotent. */
  clear(): void;
}

/**
 * Label value of a CNI command: the command itself when CNI defines it, else `"other"`, so a
 * malformed request cannot grow the series without bound.
 *
 * @param command `CNI_COMMAND` as received
 * @returns one of ADD, DEL, CHECK, GC, STATUS, VERSION or `"other"`
 * @example
 * ```ts
 * commandLabel("ADD"); // "ADD"
 * commandLabel("rm -rf"); // "other"
 * ```
 */
export function commandLabel(command: string): string {
  return COMMANDS.has(command) ? command : "other";
}

/**
 * Builds the daemon's registry with every series of the module doc and an observer feeding it.
 *
 * @param opts `fallbackFile`: the forwarder's fallbacks file (`<socket dir>/fallbacks`), counted
 *   at every scrape (only the appended bytes are read); without it `manifold_fallback_total` stays 0. `defaultMetrics` (default
 *   true): register prom-client's process metrics.
 * @returns the observer and the scrape function
 */
export function createDaemonMetrics(
  opts: { fallbackFile?: string; defaultMetrics?: boolean } = {},
): DaemonMetrics {
  const registry = new Registry();
  const registers = [registry];
  const requests = new Counter({
    name: "manifold_cni_requests_total",
    help: "CNI requests served by the daemon, by CNI_COMMAND and result (success or error).",
    labelNames: ["command", "result"] as const,
    registers,
  });
  const requestSeconds = new Histogram({
    name: "manifold_cni_request_duration_seconds",
    help: "Wall time of CNI requests served by the daemon, in seconds.",
    labelNames: ["command"] as const,
    buckets: [...DURATION_BUCKETS],
    registers,
  });
  const delegateSeconds = new Histogram({
    name: "manifold_delegate_duration_seconds",
    help: "Wall time of delegate plugin executions, in seconds, by plugin type and CNI_COMMAND.",
    labelNames: ["plugin", "command"] as const,
    buckets: [...DURATION_BUCKETS],
    registers,
  });
  const apiRequests = new Counter({
    name: "manifold_api_requests_total",
    help: "Kubernetes API requests, by HTTP method and status code (0: no answer).",
    labelNames: ["verb", "code"] as const,
    registers,
  });
  const listPageShrunk = new Counter({
    name: "manifold_api_list_page_shrunk_total",
    help: "List pages asked again with half the limit after an answer over the API body cap, " +
      "by resource.",
    labelNames: ["resource"] as const,
    registers,
  });
  const attachments = new Gauge({
    name: "manifold_attachments",
    help: "Live attachments in the daemon's cache.",
    registers,
  });
  const policySyncSeconds = new Histogram({
    name: "manifold_policy_sync_duration_seconds",
    help:
      "Wall time of MultiNetworkPolicy syncs (cache scan, engine, nftables batches), in seconds.",
    buckets: [...DURATION_BUCKETS],
    registers,
  });
  const policyFailures = new Counter({
    name: "manifold_policy_apply_failures_total",
    help: "Pods whose MultiNetworkPolicy rules could not be applied as computed, by reason " +
      "(apply_failed, remove_failed, sync_failed, no_sandbox).",
    labelNames: ["reason"] as const,
    registers,
  });
  for (const reason of POLICY_FAILURE_REASONS) policyFailures.inc({ reason }, 0);
  const policyPodChanges = new Counter({
    name: "manifold_policy_pod_changes_total",
    help: "Pod changes of the MultiNetworkPolicy pod watch, by effect: sync (a sync was " +
      "scheduled), ignored (not on this node and named by no policy's peer).",
    labelNames: ["effect"] as const,
    registers,
  });
  const hotPlugChanges = new Counter({
    name: "manifold_hotplug_changes_total",
    help: "Hot-plug changes of running pods' networks, by op (add, remove; change: a refused " +
      "change of an attached element) and result (success, error, refused).",
    labelNames: ["op", "result"] as const,
    registers,
  });
  const hotPlugSeconds = new Histogram({
    name: "manifold_hotplug_change_duration_seconds",
    help: "Wall time of a hot-plug change of one pod (lock to network-status PATCH), in seconds.",
    labelNames: ["result"] as const,
    buckets: [...DURATION_BUCKETS],
    registers,
  });
  const events = new Counter({
    name: "manifold_events_total",
    help: "Kubernetes events posted by the daemon (after the events policy), by type and reason.",
    labelNames: ["type", "reason"] as const,
    registers,
  });
  const acceptErrors = new Counter({
    name: "manifold_accept_errors_total",
    help: "Failed accept(2) calls on the daemon socket (e.g. out of file descriptors).",
    registers,
  });
  const publishLag = new Histogram({
    name: "manifold_status_publish_lag_seconds",
    help: 'Time from ADD queueing a network-status ("statusPublish": "async") to its write on ' +
      "the pod, in seconds.",
    buckets: [...DURATION_BUCKETS],
    registers,
  });
  const publishPending = new Gauge({
    name: "manifold_status_pending",
    help: 'Network-statuses queued by ADD ("statusPublish": "async") and not yet written.',
    registers,
  });
  const publishGaveUp = new Counter({
    name: "manifold_status_publish_gave_up_total",
    help: "Network-statuses given up after 5 permanent failures of their PATCH (400, 403, " +
      "non-UID 422); each also raised a StatusPublishFailed Warning event on the pod.",
    registers,
  });
  const fallbacks = opts.fallbackFile === undefined
    ? undefined
    : new LineCounter(opts.fallbackFile);
  new Counter({
    name: "manifold_fallback_total",
    help: "CNI requests the forwarder ran in-process because the daemon did not answer.",
    registers,
    async collect() {
      const n = fallbacks === undefined ? 0 : await fallbacks.count();
      this.reset();
      if (n > 0) this.inc(n);
    },
  });
  let loopLag: LoopLagSampler | undefined;
  if (opts.defaultMetrics ?? true) {
    loopLag = defaultMetrics(registry);
    for (const name of [...PROC_SELF_SERIES, ...LINT_FAILING_SERIES]) {
      registry.removeSingleMetric(name);
    }
    new Gauge({
      name: "process_resident_memory_bytes",
      help: "Resident memory size in bytes.",
      registers,
      collect() {
        this.set(Deno.memoryUsage().rss);
      },
    });
    new Gauge({
      name: "process_open_fds",
      help: "Number of open file descriptors.",
      registers,
      collect() {
        try {
          this.set(openFds());
        } catch { /* no FFI: left out of the scrape's value */ }
      },
    });
    new Gauge({
      name: "process_max_fds",
      help: "Maximum number of open file descriptors.",
      registers,
      collect() {
        try {
          this.set(maxFds());
        } catch { /* no FFI */ }
      },
    });
  }
  const observer: DaemonObserver = {
    cniRequest(command, result, seconds) {
      const c = commandLabel(command);
      requests.inc({ command: c, result });
      requestSeconds.observe({ command: c }, seconds);
    },
    delegate(plugin, command, seconds) {
      delegateSeconds.observe(
        { plugin: plugin.slice(0, 64), command: commandLabel(command) },
        seconds,
      );
    },
    apiRequest(verb, code) {
      const v = verb.toUpperCase();
      apiRequests.inc({ verb: VERBS.has(v) ? v : "other", code: String(code) });
    },
    apiListPageShrunk(resource) {
      listPageShrunk.inc({ resource: resource.slice(0, 64) });
    },
    attachments(count) {
      attachments.set(count);
    },
    policySync(seconds, failures) {
      policySyncSeconds.observe(seconds);
      for (const [reason, n] of Object.entries(failures) as [PolicyFailureReason, number][]) {
        if (n > 0 && POLICY_FAILURE_REASONS.includes(reason)) policyFailures.inc({ reason }, n);
      }
    },
    policyPodChange(effect) {
      policyPodChanges.inc({ effect });
    },
    hotPlugChange(op, result) {
      hotPlugChanges.inc({ op, result });
    },
    hotPlugDuration(seconds, result) {
      hotPlugSeconds.observe({ result }, seconds);
    },
    event(type, reason) {
      // Reasons are this program's constants; bound the label anyway.
      events.inc({ type, reason: /^[A-Za-z]{1,64}$/.test(reason) ? reason : "other" });
    },
    acceptError() {
      acceptErrors.inc();
    },
    statusPublished(lagSeconds) {
      publishLag.observe(lagSeconds);
    },
    statusPending(count) {
      publishPending.set(count);
    },
    statusGaveUp() {
      publishGaveUp.inc();
    },
  };
  return {
    observer,
    contentType: registry.contentType,
    scrape: () => registry.metrics(),
    clear: () => {
      loopLag?.stop();
      registry.clear();
    },
  };
}

/**
 * prom-client's `collectDefaultMetrics({ register: registry })`, registrar by registrar in its
 * order (prom-client 15.1.3 lib/defaultMetrics.js), except the event-loop lag: its
 * `monitorEventLoopDelay` histogram costs 10–18 MiB of RSS under Deno (loop_delay.ts), so the
 * same series come from {@link registerEventLoopLag}.
 *
 * @returns the event-loop lag sampler, to stop
 */
function defaultMetrics(registry: Registry): LoopLagSampler {
  // None of these registrars reads its config (only the left-out eventLoopLag one does).
  for (const m of DEFAULT_METRICS.before) m(registry, {});
  const loopLag = registerEventLoopLag(registry);
  for (const m of DEFAULT_METRICS.after) m(registry, {});
  return loopLag;
}
