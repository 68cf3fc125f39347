/**
 * A loopback kubelet pod-resources gRPC server on a unix socket, for tests: `@grpc/grpc-js`
 * (the library the client uses) and Manifold's codec. Serves `v1.PodResourcesLister/List`,
 * `Get` and `GetAllocatableResources` from a list of pods; `Get` can be switched off
 * (UNIMPLEMENTED, as kubelet < 1.27) or made to fail.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import {
  decodeGetPodResourcesRequest,
  encodeAllocatableResourcesResponse,
  encodeGetPodResourcesResponse,
  encodeListPodResourcesResponse,
} from "../../lib/devices/pod_resources_proto.ts";
import type { ContainerDevices, PodResources } from "../../lib/devices/pod_resources_proto.ts";

/** Options of {@link startPodResourcesServer}. */
export interface PodResourcesServerOptions {
  /** The pods kubelet "allocated" devices to. */
  pods: PodResources[];
  /** The node's allocatable devices. */
  allocatable?: ContainerDevices[];
  /** Answer `Get` with UNIMPLEMENTED (kubelet < 1.27). */
  noGet?: boolean;
  /** Answer every call with this gRPC status code. */
  failWith?: grpc.status;
}

/** A running server; `stop()` in `finally`. */
export interface PodResourcesServer {
  socket: string;
  /** Method paths called, in order. */
  calls: string[];
  stop(): Promise<void>;
}

const bytes = (b: Buffer) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
const buffer = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

function method(path: string) {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: buffer,
    requestDeserialize: bytes,
    responseSerialize: buffer,
    responseDeserialize: bytes,
  };
}

/** Starts the server on `<dir>/kubelet.sock`. */
export async function startPodResourcesServer(
  dir: string,
  options: PodResourcesServerOptions,
): Promise<PodResourcesServer> {
  const socket = `${dir}/kubelet.sock`;
  const calls: string[] = [];
  const server = new grpc.Server();
  type Callback = (err: grpc.ServiceError | null, value?: Uint8Array) => void;
  type Failure = [grpc.status, string];
  const serve = (path: string, answer: (req: Uint8Array) => Uint8Array | Failure) => {
    return (call: { request: Uint8Array }, callback: Callback) => {
      calls.push(path);
      const out: Uint8Array | Failure = options.failWith !== undefined
        ? [options.failWith, `test server answers ${grpc.status[options.failWith]}`]
        : answer(call.request);
      if (Array.isArray(out)) {
        const [code, details] = out;
        callback(
          Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() }),
        );
      } else callback(null, out);
    };
  };
  const service = {
    List: method("/v1.PodResourcesLister/List"),
    Get: method("/v1.PodResourcesLister/Get"),
    GetAllocatableResources: method("/v1.PodResourcesLister/GetAllocatableResources"),
  };
  server.addService(service as unknown as grpc.ServiceDefinition, {
    List: serve(service.List.path, () => encodeListPodResourcesResponse(options.pods)),
    Get: serve(service.Get.path, (req) => {
      if (options.noGet) return [grpc.status.UNIMPLEMENTED, "unknown method Get"];
      const { podName, podNamespace } = decodeGetPodResourcesRequest(req);
      const pod = options.pods.find((p) => p.name === podName && p.namespace === podNamespace);
      // kubelet answers an unknown pod with a plain error (gRPC UNKNOWN).
      return pod
        ? encodeGetPodResourcesResponse(pod)
        : [grpc.status.UNKNOWN, `pod ${podName} in namespace ${podNamespace} not found`];
    }),
    GetAllocatableResources: serve(
      service.GetAllocatableResources.path,
      () => encodeAllocatableResourcesResponse(options.allocatable ?? []),
    ),
  } as unknown as grpc.UntypedServiceImplementation);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(
      `unix:${socket}`,
      grpc.ServerCredentials.createInsecure(),
      (err) => err ? reject(err) : resolve(),
    )
  );
  return {
    socket,
    calls,
    stop: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 500);
      }),
  };
}
