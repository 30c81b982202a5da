import { connect } from "node:net";
import { RegistryService } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { buildProcess, createLogger, type BuiltProcess } from "@gov/service-kit";
import { describeHostileInput, type HostileTarget } from "@gov/testkit/hostile-input";
import { afterAll, beforeAll, expect } from "vitest";
import { createRegistryModule, MAX_REGISTRY_MESSAGE_BYTES } from "../src/module.js";
import { createMemoryRegistryStore } from "../src/store/memory-registry-store.js";
import { createRegistryGateway, testSources, type RegistryGateway } from "./harness.js";

// A short gov.limits.request-timeout, so that slow-body attacks are cut within the test's time.
const REQUEST_TIMEOUT_MS = 1500;
const JSON_BODY = 128 * 1024; // gov.limits.json-body in the test sources
const env = { GOV_LIMITS_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`, GOV_LIMITS_JSON_BODY: String(JSON_BODY) };
const limits = { restBody: JSON_BODY, restBodySetting: "gov.limits.json-body", message: MAX_REGISTRY_MESSAGE_BYTES + 1024, requestTimeoutMs: REQUEST_TIMEOUT_MS };
const logger = createLogger("test", process.env.TEST_LOG_LEVEL ?? "silent");

let gw: RegistryGateway | undefined;
let target: HostileTarget | undefined;
let own: BuiltProcess | undefined;
let serviceTarget: HostileTarget | undefined;

beforeAll(async () => {
  gw = await createRegistryGateway(createMemoryRegistryStore(), env);
  const urls = await gw.listen();
  target = { restUrl: urls.url, connectUrl: urls.url, grpcUrl: urls.grpcUrl };
  // The registry service as its own process: Connect + gRPC-Web on h1, gRPC on h2c.
  own = await buildProcess({
    name: "test-registry-own",
    modules: [createRegistryModule()],
    sources: testSources({ ...env, GOV_REGISTRY_SERVICE_PORT: "0", GOV_REGISTRY_SERVICE_GRPC_PORT: "0" }),
    logger,
  });
  const ownUrls = await own.listen({ managementPort: 0 });
  serviceTarget = { restUrl: "", connectUrl: ownUrls.url, grpcUrl: ownUrls.grpcUrl! };
});

afterAll(async () => {
  await own?.shutdown();
  await gw?.close();
});

const NS = encodeURIComponent("{stalled}");
// An instance whose metadata makes each watch message about 120 KiB.
const bigMetadata = (i: number) => Object.fromEntries(Array.from({ length: 30 }, (_, k) => [`k${k}`, `${i}:`.padEnd(4000, "abcdefghijklmnopqrstuvwxyz")]));

/** An SSE watch on a raw socket that reads its first event (the watch is registered), then never reads again. */
async function nonReadingWatcher(): Promise<() => void> {
  const { hostname, port } = new URL(target!.restUrl);
  const socket = connect(Number(port), hostname);
  socket.on("error", () => undefined);
  socket.write(`GET /v1/namespaces/${NS}/services/big/instances/watch HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
  let seen = "";
  while (!seen.includes('"current"')) seen += await new Promise<string>((resolve) => socket.once("data", (d: Buffer) => resolve(d.toString("latin1"))));
  socket.pause(); // the kernel's buffers fill, then the server's socket backs up
  return () => socket.destroy();
}

/**
 * The suite sends every RPC to the HTTP/1.1 listener too, where a bidirectional stream (Keepalive) cannot run at all:
 * every request for it there is refused with failed_precondition ("needs HTTP/2") before its body is read, so it is
 * left out here; its hostile input is tested on the listeners that serve it (h2c), and that refusal, in
 * keepalive.test.ts.
 */
const unaryAndServerStreams = { ...RegistryService, methods: RegistryService.methods.filter((m) => m.methodKind !== "bidi_streaming") };

describeHostileInput("registry service (all-in-one, embedded store)", {
  service: unaryAndServerStreams,
  target: () => target!,
  pathValues: { namespace: "{hostile}", service_id: "order", instance_id: "order@http#h#1" },
  limits,
  // Buffering every change for every watcher would be 10 × 250 × 120 KiB ≈ 290 MiB, well over what the suite allows
  // (twice its 64 MiB RSS bound), so a server without backpressure fails here; backpressure holds about one each.
  nonReadingWatchers: {
    count: 10,
    updates: 250,
    open: nonReadingWatcher,
    write: async (i) => {
      const res = await fetch(`${target!.restUrl}/v1/namespaces/${NS}/services/big/instances`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ schema: "http", host: `h${i % 5}`, port: 80, metadata: bigMetadata(i) }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    },
  },
});

describeHostileInput("registry service (its own process's listeners)", {
  service: unaryAndServerStreams,
  rest: false,
  target: () => serviceTarget!,
  limits,
});
