/**
 * Client of the kubelet pod-resources gRPC API (`v1.PodResourcesLister` on
 * `/var/lib/kubelet/pod-resources/kubelet.sock`; `k8s.io/kubelet/pkg/apis/podresources/v1`):
 * `Get` (one pod; Kubernetes ≥ 1.27, gated by `KubeletPodResourcesGet`), `List` (every pod on
 * the node) and `GetAllocatableResources`.
 *
 * gRPC is `@grpc/grpc-js` and protobuf the wire layer of `@bufbuild/protobuf`, both loaded on
 * the first {@link PodResourcesClient.connect}: importing grpc-js costs about 70 ms, paid only
 * by ADDs of pods that attach a network with a `resourceName`.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { Buffer } from "node:buffer";
import { CniError, CniErrorCode } from "../cni/errors.ts";
import { DEFAULT_POD_RESOURCES_TIMEOUT_MS } from "./constants.ts";
import type { ContainerDevices, PodResources } from "./pod_resources_proto.ts";
import { errorText } from "../util/text.ts";

/** gRPC method paths of `v1.PodResourcesLister`. */
export const POD_RESOURCES_METHODS = {
  list: "/v1.PodResourcesLister/List",
  get: "/v1.PodResourcesLister/Get",
  allocatable: "/v1.PodResourcesLister/GetAllocatableResources",
} as const;

/** kubelet's limit for pod-resources messages (16 MiB, `podresources.DefaultMaxMsgSize`). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/** gRPC status codes used here (grpc `status.h`). */
const GRPC_UNIMPLEMENTED = 12;
const GRPC_UNKNOWN = 2;

/**
 * A failed pod-resources call: CNI code 11 (try again later) with the gRPC status code and
 * message in `grpcCode` and `details`, or code 6 when the reply cannot be decoded.
 */
export class PodResourcesError extends CniError {
  /** gRPC status code (`14` UNAVAILABLE, `4` DEADLINE_EXCEEDED, `12` UNIMPLEMENTED, …); -1 for a decoding failure. */
  readonly grpcCode: number;

  /**
   * The error of a failed call to `method`.
   *
   * @param method the gRPC method path
   * @param grpcCode gRPC status code, or -1 for a decoding failure
   * @param details the status message or decoder error
   */
  constructor(method: string, grpcCode: number, details: string) {
    super(
      grpcCode < 0 ? CniErrorCode.DecodingFailure : CniErrorCode.TryAgainLater,
      grpcCode < 0
        ? `cannot decode the kubelet pod-resources reply to ${method}`
        : `kubelet pod-resources call ${method} failed (gRPC status ${grpcCode})`,
      details,
    );
    this.name = "PodResourcesError";
    this.grpcCode = grpcCode;
  }
}

type Grpc = typeof import("@grpc/grpc-js");
type Codec = typeof import("./pod_resources_proto.ts");

/** Options of {@link PodResourcesClient.connect}. */
export interface PodResourcesClientOptions {
  /** Bound on each call, ms; default {@link DEFAULT_POD_RESOURCES_TIMEOUT_MS}. */
  timeoutMs?: number;
}

/**
 * A connection to the pod-resources API over a unix socket.
 *
 * @example
 * ```ts
 * using client = await PodResourcesClient.connect("/var/lib/kubelet/pod-resources/kubelet.sock");
 * const pod = await client.podResources("tenant-a", "web-0");
 * pod?.containers.flatMap((c) => c.devices); // [{ resourceName: "intel.com/sriov", deviceIds: ["0000:18:02.5"] }]
 * ```
 */
export class PodResourcesClient {
  readonly #client: InstanceType<Grpc["Client"]>;
  readonly #codec: Codec;
  readonly #timeoutMs: number;
  #closed = false;

  private constructor(client: InstanceType<Grpc["Client"]>, codec: Codec, timeoutMs: number) {
    this.#client = client;
    this.#codec = codec;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Loads gRPC and opens a channel to the socket (connecting happens on the first call).
   * @param socket absolute path of kubelet's unix socket
   * @param options per-call timeout
   * @returns the client; close it (or `using`) when done
   */
  static async connect(
    socket: string,
    options: PodResourcesClientOptions = {},
  ): Promise<PodResourcesClient> {
    const [grpc, codec] = await Promise.all([
      lazyImport<typeof import("@grpc/grpc-js")>("@grpc/grpc-js"),
      lazyImport<typeof import("./pod_resources_proto.ts")>(
        "./pod_resources_proto.ts",
        import.meta.url,
      ),
    ]);
    const client = new grpc.Client(`unix:${socket}`, grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.enable_retries": 0,
    });
    return new PodResourcesClient(
      client,
      codec,
      options.timeoutMs ?? DEFAULT_POD_RESOURCES_TIMEOUT_MS,
    );
  }

  /**
   * `Get`: one pod's resources.
   * @param namespace the pod's namespace
   * @param name the pod's name
   * @returns the pod's resources (kubelet answers with an error for an unknown pod)
   * @throws {PodResourcesError} on a gRPC failure or an undecodable reply
   */
  async get(namespace: string, name: string): Promise<PodResources | undefined> {
    const req = this.#codec.encodeGetPodResourcesRequest({
      podName: name,
      podNamespace: namespace,
    });
    const reply = await this.#call(POD_RESOURCES_METHODS.get, req);
    return this.#decode(
      POD_RESOURCES_METHODS.get,
      () => this.#codec.decodeGetPodResourcesResponse(reply),
    );
  }

  /**
   * `List`: every pod on the node.
   * @returns the pods' resources
   * @throws {PodResourcesError} on a gRPC failure or an undecodable reply
   */
  async list(): Promise<PodResources[]> {
    const reply = await this.#call(POD_RESOURCES_METHODS.list, new Uint8Array(0));
    return this.#decode(
      POD_RESOURCES_METHODS.list,
      () => this.#codec.decodeListPodResourcesResponse(reply),
    );
  }

  /**
   * `GetAllocatableResources`: the node's allocatable devices.
   * @returns one entry per resource (and NUMA topology), as kubelet reports them
   * @throws {PodResourcesError} on a gRPC failure or an undecodable reply
   */
  async allocatable(): Promise<ContainerDevices[]> {
    const reply = await this.#call(POD_RESOURCES_METHODS.allocatable, new Uint8Array(0));
    return this.#decode(
      POD_RESOURCES_METHODS.allocatable,
      () => this.#codec.decodeAllocatableResourcesResponse(reply),
    );
  }

  /**
   * One pod's resources by `Get`, or by `List` when kubelet does not offer `Get` (older than
   * 1.27, or the `KubeletPodResourcesGet` gate off: UNIMPLEMENTED or UNKNOWN "disabled").
   * @param namespace the pod's namespace
   * @param name the pod's name
   * @returns the pod's resources, or undefined when kubelet does not list the pod
   * @throws {PodResourcesError} when `List` fails too, or `Get` fails otherwise
   */
  async podResources(namespace: string, name: string): Promise<PodResources | undefined> {
    try {
      return await this.get(namespace, name);
    } catch (e) {
      const unsupported = e instanceof PodResourcesError &&
        (e.grpcCode === GRPC_UNIMPLEMENTED ||
          (e.grpcCode === GRPC_UNKNOWN && /disabled|not found/i.test(e.details)));
      if (!unsupported) throw e;
    }
    return (await this.list()).find((p) => p.namespace === namespace && p.name === name);
  }

  /** Closes the channel. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#client.close();
  }

  /** Same as {@link PodResourcesClient.close}. */
  [Symbol.dispose](): void {
    this.close();
  }

  #decode<T>(method: string, fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      throw new PodResourcesError(method, -1, errorText(e));
    }
  }

  #call(method: string, request: Uint8Array): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest<Uint8Array, Uint8Array>(
        method,
        (b) => toBuffer(b),
        (b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength),
        request,
        { deadline: Date.now() + this.#timeoutMs },
        (err, value) => {
          if (err) {
            reject(new PodResourcesError(method, err.code ?? GRPC_UNKNOWN, err.details ?? ""));
          } else resolve(value ?? new Uint8Array(0));
        },
      );
    });
  }
}

/** grpc-js serializers must return a Node Buffer: a view over the same bytes, no copy. */
function toBuffer(b: Uint8Array): Buffer {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength) as Buffer;
}
