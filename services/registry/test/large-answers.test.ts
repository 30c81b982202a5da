// A service with thousands of instances, listed and watched on every protocol: the answer is complete and correct, and
// making it never blocks the event loop for long (issue #6: no request may block it for more than ~50 ms). Before
// large-lists.ts (service kit), these answers blocked it for 70–180 ms each here (protobuf the longest); now 15–28 ms.
import http2 from "node:http2";
import { create, fromBinary, fromJson, toBinary, toJson } from "@bufbuild/protobuf";
import {
  InstanceSchema,
  ListInstancesRequestSchema,
  ListInstancesResponseSchema,
  RegistryService,
  WatchInstancesRequestSchema,
  WatchInstancesResponseSchema,
  type Instance,
} from "@gov/api/gen/gov/registry/v1/registry_pb";
import { buildGateway } from "@gov/gateway";
import { createLogger, remoteTransport } from "@gov/service-kit";
import { stallMonitor } from "@gov/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import type { RegistryStore } from "../src/store/registry-store.js";
import { createRegistryGateway, ns, seg, type RegistryGateway } from "./harness.js";

const INSTANCES = 8000;
/** The contract's ~50 ms, with the ZIP tests' margin for a slower machine (see `stallMonitor`). */
const MAX_STALL_MS = 100;
const LIST = "/gov.registry.v1.RegistryService/ListInstances";
const WATCH = "/gov.registry.v1.RegistryService/WatchInstances";

/** `run`'s result and the longest event-loop stall while it ran (the server is in this process; `run` only reads bytes). */
async function stallOf<T>(run: () => Promise<T>): Promise<{ value: T; stallMs: number }> {
  let stallMs = 0;
  const stalls = stallMonitor();
  const value = await run().finally(() => (stallMs = stalls.stop()));
  return { value, stallMs };
}

/** A gRPC length-prefixed frame (uncompressed). */
function framed(bytes: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + bytes.length);
  out.writeUInt32BE(bytes.length, 1);
  out.set(bytes, 5);
  return out;
}
/**
 * Collects a response's chunks until `wanted` finds what it looks for in them. The test's own reading runs in the
 * process whose event loop is watched, so it must be linear: it looked at all the bytes so far on every chunk
 * (`Buffer.concat` and `toString` of up to 3 MB, ~50 times for an 8,000-instance answer) and that quadratic work,
 * run in one go while the chunks were already buffered, made up most of the REST watch's measured 100-125 ms stalls.
 */
type Wanted = (chunks: Buffer[], size: number, latest: Buffer) => Buffer | undefined;

/** The first whole frame, once it has all arrived (its length is in the first 5 bytes). */
const firstFrame: Wanted = (chunks, size) => {
  if (size < 5) return undefined;
  const head = chunks[0].length >= 5 ? chunks[0] : Buffer.concat(chunks);
  const length = head.readUInt32BE(1);
  return size >= 5 + length ? Buffer.concat(chunks, size).subarray(5, 5 + length) : undefined;
};

/** The first SSE event's `data:` text, looked for only when a chunk ends an event (a blank line). */
const firstSseData: Wanted = (chunks, size, latest) => {
  const previous = chunks.length > 1 ? chunks[chunks.length - 2] : undefined;
  const endsEvent = latest.includes("\n\n") || (latest[0] === 10 && previous?.[previous.length - 1] === 10);
  if (!endsEvent) return undefined;
  const text = Buffer.concat(chunks, size).toString();
  const start = text.indexOf("data: ");
  const end = start < 0 ? -1 : text.indexOf("\n\n", start);
  return end < 0 ? undefined : Buffer.from(text.slice(start + 6, end));
};

/** A reader of chunks for `wanted`: each chunk is kept, and the wanted bytes come back once they have all arrived. */
function collector(wanted: Wanted): { add(chunk: Buffer): Buffer | undefined; size(): number; text(): string } {
  const chunks: Buffer[] = [];
  let size = 0;
  return {
    add(chunk) {
      chunks.push(chunk);
      size += chunk.length;
      return wanted(chunks, size, chunk);
    },
    size: () => size,
    text: () => Buffer.concat(chunks, size).toString().slice(0, 200),
  };
}

/** An h2c gRPC call that reads until its first message has arrived, then closes the stream. */
function grpcFirstMessage(grpcUrl: string, path: string, request: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(grpcUrl);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers" });
    const data = collector(firstFrame);
    stream.on("data", (chunk: Buffer) => {
      const message = data.add(chunk);
      if (message) {
        stream.close();
        session.close();
        resolve(Buffer.from(message));
      }
    });
    stream.on("error", reject);
    stream.on("end", () => reject(new Error(`the stream ended before a whole message (${data.size()} bytes)`)));
    stream.end(framed(request));
  });
}

/** An HTTP/1.1 response body read until `wanted` finds what it looks for (a watch never ends). */
async function readUntil(res: Response, wanted: Wanted): Promise<Buffer> {
  const reader = res.body!.getReader();
  const data = collector(wanted);
  for (;;) {
    const { value, done: ended } = await reader.read();
    const found = value ? data.add(Buffer.from(value.buffer, value.byteOffset, value.byteLength)) : undefined;
    if (found) {
      await reader.cancel();
      return found;
    }
    if (ended) throw new Error(`the response ended early (${res.status}, ${data.size()} bytes): ${data.text()}`);
  }
}

/** An instance from protobuf JSON (REST answers also carry implicit values, which protobuf JSON reads as well). */
const fromJsonInstance = (json: unknown): Instance => fromJson(InstanceSchema, json as never);

describe("a service of 8,000 instances, listed and watched on every protocol", () => {
  let gw: RegistryGateway;
  let store: RegistryStore;
  let urls: { url: string; grpcUrl: string };
  const namespace = ns("big");
  let n = 0;

  /** A gateway of its own whose registry is the process above, reached over HTTP (GOV_REGISTRY_SERVICE_URL). */
  let remoteGateway: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    gw = await createRegistryGateway((store = createMemoryRegistryStore()));
    urls = await gw.listen();
    const app = await buildGateway({ services: [{ service: RegistryService, transport: remoteTransport(urls.url) }], logger: createLogger("test", "silent"), limits: { maxJsonBody: 1 << 20, maxZipBytes: 1 << 20 } });
    remoteGateway = { url: await app.listen({ port: 0, host: "127.0.0.1" }), close: () => app.close() };
  });
  afterAll(async () => {
    await remoteGateway?.close();
    await gw?.close();
  });

  /**
   * A fresh service of INSTANCES instances, written straight to the store: each case then meets messages and
   * encodings no earlier case made (they are kept per record).
   */
  async function bigService(): Promise<{ serviceId: string; ids: string[] }> {
    const serviceId = `big-${n++}`;
    const now = Date.now();
    const ids: string[] = [];
    for (let k = 0; k < INSTANCES; k++) {
      const host = `10.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`;
      const instanceId = `${serviceId}@http#${host}#8080`;
      ids.push(instanceId);
      await store.register(namespace, { instanceId, serviceId, schema: "http", host, port: 8080, weight: 1 + (k % 3), isEphemeral: true, ttlAt: now + 600_000, ttlMs: 600_000, metadata: { zone: k % 2 ? "a" : "b", version: "1.4.2" } }, now);
    }
    return { serviceId, ids: ids.sort() };
  }

  /** The REST list of a gateway (the one at `baseUrl()`: the URLs are known only once the servers listen). */
  const restList = (baseUrl: () => string) => async (serviceId: string) => {
    const body = await stalled(async () => Buffer.from(await (await fetch(`${baseUrl()}/v1/namespaces/${seg(namespace)}/services/${serviceId}/instances`)).arrayBuffer()));
    return (JSON.parse(body.toString()) as unknown[]).map((j) => fromJsonInstance(j));
  };
  const listRequest = (serviceId: string) => toBinary(ListInstancesRequestSchema, create(ListInstancesRequestSchema, { namespace, serviceId }));

  const cases: { name: string; read: (serviceId: string) => Promise<Instance[]> }[] = [
    { name: "REST list (JSON)", read: restList(() => urls.url) },
    {
      name: "Connect unary, JSON",
      read: async (serviceId) => {
        const body = await stalled(async () => {
          const res = await fetch(`${urls.url}${LIST}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ namespace, serviceId }) });
          return Buffer.from(await res.arrayBuffer());
        });
        return (JSON.parse(body.toString()) as { instances: unknown[] }).instances.map((j) => fromJsonInstance(j));
      },
    },
    {
      name: "Connect unary, protobuf",
      read: async (serviceId) => {
        const body = await stalled(async () => {
          const res = await fetch(`${urls.url}${LIST}`, { method: "POST", headers: { "content-type": "application/proto" }, body: listRequest(serviceId) });
          return Buffer.from(await res.arrayBuffer());
        });
        return fromBinary(ListInstancesResponseSchema, body).instances;
      },
    },
    {
      name: "gRPC unary (h2c)",
      read: async (serviceId) => {
        const body = await stalled(() => grpcFirstMessage(urls.grpcUrl, LIST, listRequest(serviceId)));
        return fromBinary(ListInstancesResponseSchema, body).instances;
      },
    },
    {
      // a GET call of a read (NO_SIDE_EFFECTS) is Connect-ES's to serve, as are the gRPC protocols' JSON codecs
      name: "Connect unary GET, JSON",
      read: async (serviceId) => {
        const query = new URLSearchParams({ connect: "v1", encoding: "json", message: JSON.stringify({ namespace, serviceId }) });
        const body = await stalled(async () => Buffer.from(await (await fetch(`${urls.url}${LIST}?${query}`)).arrayBuffer()));
        return (JSON.parse(body.toString()) as { instances: unknown[] }).instances.map((j) => fromJsonInstance(j));
      },
    },
    {
      name: "Connect unary GET, protobuf",
      read: async (serviceId) => {
        const query = new URLSearchParams({ connect: "v1", encoding: "proto", base64: "1", message: Buffer.from(listRequest(serviceId)).toString("base64url") });
        const body = await stalled(async () => Buffer.from(await (await fetch(`${urls.url}${LIST}?${query}`)).arrayBuffer()));
        return fromBinary(ListInstancesResponseSchema, body).instances;
      },
    },
    {
      name: "gRPC-Web unary, JSON",
      read: async (serviceId) => {
        const body = await stalled(async () => {
          const res = await fetch(`${urls.url}${LIST}`, { method: "POST", headers: { "content-type": "application/grpc-web+json" }, body: new Uint8Array(framed(Buffer.from(JSON.stringify({ namespace, serviceId })))) });
          return readUntil(res, firstFrame);
        });
        return (JSON.parse(body.toString()) as { instances: unknown[] }).instances.map((j) => fromJsonInstance(j));
      },
    },
    {
      name: "gRPC-Web unary",
      read: async (serviceId) => {
        const body = await stalled(async () => {
          const res = await fetch(`${urls.url}${LIST}`, { method: "POST", headers: { "content-type": "application/grpc-web+proto" }, body: new Uint8Array(framed(listRequest(serviceId))) });
          return readUntil(res, firstFrame);
        });
        return fromBinary(ListInstancesResponseSchema, body).instances;
      },
    },
    {
      name: "gRPC watch, first message (h2c)",
      read: async (serviceId) => {
        const body = await stalled(() => grpcFirstMessage(urls.grpcUrl, WATCH, toBinary(WatchInstancesRequestSchema, create(WatchInstancesRequestSchema, { namespace, serviceId }))));
        const first = fromBinary(WatchInstancesResponseSchema, body);
        expect(first.op).toBe("current");
        return first.instances;
      },
    },
    {
      name: "Connect watch, JSON, first message",
      read: async (serviceId) => {
        const body = await stalled(async () => {
          const res = await fetch(`${urls.url}${WATCH}`, { method: "POST", headers: { "content-type": "application/connect+json" }, body: new Uint8Array(framed(Buffer.from(JSON.stringify({ namespace, serviceId })))) });
          return readUntil(res, firstFrame);
        });
        const first = JSON.parse(body.toString()) as { op: string; instances: unknown[] };
        expect(first.op).toBe("current");
        return first.instances.map((j) => fromJsonInstance(j));
      },
    },
    {
      name: "Connect watch, protobuf, first message",
      read: async (serviceId) => {
        const body = await stalled(async () => {
          const res = await fetch(`${urls.url}${WATCH}`, { method: "POST", headers: { "content-type": "application/connect+proto" }, body: new Uint8Array(framed(Buffer.from(toBinary(WatchInstancesRequestSchema, create(WatchInstancesRequestSchema, { namespace, serviceId }))))) });
          return readUntil(res, firstFrame);
        });
        const first = fromBinary(WatchInstancesResponseSchema, body);
        expect(first.op).toBe("current");
        return first.instances;
      },
    },
    { name: "REST list through a gateway that reaches the registry over the network (split deployment)", read: restList(() => remoteGateway.url) },
    {
      name: "REST watch (SSE), first event",
      read: async (serviceId) => {
        const body = await stalled(async () => readUntil(await fetch(`${urls.url}/v1/namespaces/${seg(namespace)}/services/${serviceId}/instances/watch`), firstSseData));
        const first = JSON.parse(body.toString()) as { op: string; instances: unknown[] };
        expect(first.op).toBe("current");
        return first.instances.map((j) => fromJsonInstance(j));
      },
    },
  ];

  let lastStall = 0;
  /** Runs `read` under the stall monitor, and keeps its stall for the case's assertion. */
  async function stalled<T>(read: () => Promise<T>): Promise<T> {
    const { value, stallMs } = await stallOf(read);
    lastStall = stallMs;
    return value;
  }

  for (const c of cases) {
    it(`${c.name}: every instance, and no stall over ${MAX_STALL_MS} ms`, async () => {
      const { serviceId, ids } = await bigService();
      const instances = await c.read(serviceId);
      expect(lastStall, `${c.name}: the event loop stalled ${lastStall.toFixed(1)} ms`).toBeLessThan(MAX_STALL_MS);
      expect(instances.map((i) => i.instanceId).sort()).toEqual(ids);
      // one instance whole, as protobuf JSON: every field survived the joined encoding
      const sample = instances.find((i) => i.instanceId === ids[7])!;
      expect(toJson(InstanceSchema, sample)).toMatchObject({ instanceId: ids[7], serviceId, schema: "http", port: 8080, isEphemeral: true, metadata: { version: "1.4.2" } });
    }, 60_000);
  }
});
