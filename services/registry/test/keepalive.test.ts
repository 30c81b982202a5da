import { spawn } from "node:child_process";
import http2 from "node:http2";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  type KeepaliveRequest,
  KeepaliveRequestSchema,
  type KeepaliveResponse,
  type RegisterInstanceRequestSchema,
  RegistryService,
} from "@gov/api/gen/gov/registry/v1/registry_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRegistryGateway, ns, storeTargets, type RegistryGateway } from "./harness.js";

/** One raw call on an h2c listener: `body` sent, the request side then left open; answers the status and message. */
function rawH2Call(url: string, contentType: string, body: Uint8Array): Promise<{ grpcStatus?: string; message: string; data: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": "/gov.registry.v1.RegistryService/Keepalive", "content-type": contentType, te: "trailers" });
    let grpcStatus: string | undefined;
    let message = "";
    let data = "";
    const take = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) [grpcStatus, message] = [String(h["grpc-status"]), decodeURIComponent(String(h["grpc-message"] ?? ""))];
    };
    const timer = setTimeout(() => (session.destroy(), reject(new Error("no answer within 5 s"))), 5000);
    stream.on("response", take);
    stream.on("trailers", take);
    stream.on("data", (c: Buffer) => void (data += c.toString("latin1")));
    stream.on("error", () => undefined);
    // The server's side ending is the answer; ours is still open, so the stream never closes by itself.
    const finish = () => (clearTimeout(timer), session.destroy(), resolve({ grpcStatus, message, data }));
    stream.on("end", finish);
    stream.on("close", finish);
    stream.write(body); // the request side stays open, as a keepalive client's does
  });
}

const envelope = (payload: Uint8Array, declared = payload.length) => {
  const out = new Uint8Array(5 + payload.length);
  new DataView(out.buffer).setUint32(1, declared);
  out.set(payload, 5);
  return out;
};

const CHILD = join(dirname(fileURLToPath(import.meta.url)), "fixtures/keepalive-client.ts");
const TTL_MS = 1000;
const ttl = { seconds: BigInt(TTL_MS / 1000), nanos: 0 };

/** A keepalive stream whose request side the test controls: `ping()` sends an empty message, `end()` closes it. */
function openKeepalive(client: Client<typeof RegistryService>, register: MessageInitShape<typeof RegisterInstanceRequestSchema> | undefined) {
  const queue: KeepaliveRequest[] = [create(KeepaliveRequestSchema, { register })];
  let wake: (() => void) | undefined;
  let ended = false;
  async function* requests() {
    for (;;) {
      while (queue.length) yield queue.shift()!;
      if (ended) return;
      await new Promise<void>((r) => (wake = r));
    }
  }
  const answers: KeepaliveResponse[] = [];
  const done = (async () => {
    for await (const m of client.keepalive(requests())) answers.push(m);
  })()
    .then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    )
    // As a well-behaved client does: once the server has answered for good, close our side too (a half-open stream
    // would hold the server's h2 session, and its shutdown, open).
    .finally(() => ((ended = true), wake?.()));
  return {
    answers,
    done,
    ping: () => (queue.push(create(KeepaliveRequestSchema, {})), wake?.()),
    send: (m: KeepaliveRequest) => (queue.push(m), wake?.()),
    end: () => ((ended = true), wake?.()),
  };
}

for (const target of storeTargets()) {
  describe.skipIf(target.skip)(`keepalive stream on the ${target.name} store`, () => {
    let gw: RegistryGateway;
    let grpcUrl: string;
    let list: (n: string, serviceId: string) => Promise<string[]>;
    beforeAll(async () => {
      gw = await createRegistryGateway(await target.open());
      ({ grpcUrl } = await gw.listen());
      const reader = createClient(RegistryService, createGrpcTransport({ baseUrl: grpcUrl }));
      list = async (n, serviceId) => (await reader.listInstances({ namespace: n, serviceId })).instances.map((i) => i.host);
    });
    afterAll(async () => gw?.close());

    // Both full-duplex transports a client can use: gRPC (h2c) and Connect over HTTP/2.
    const transports = () => [
      { name: "grpc", client: createClient(RegistryService, createGrpcTransport({ baseUrl: grpcUrl })) },
      { name: "connect-h2", client: createClient(RegistryService, createConnectTransport({ baseUrl: grpcUrl, httpVersion: "2" })) },
    ];

    it("keeps the instance alive for several ttls without a client timer; after a graceful end it expires one ttl later", async () => {
      const n = ns("ka");
      // A ttl of 2 s (renewed every 667 ms), not TTL_MS: the server renewing it runs in this test process, and a stall of
      // the process past two thirds of a 1 s ttl (a 700 ms one, as CI's two loaded cores made past 500 ms) let an
      // instance expire between two renewals, though neither stream ended.
      const TTL_MS = 2000;
      const ttl = { seconds: BigInt(TTL_MS / 1000), nanos: 0 };
      const streams = transports().map(({ name, client }) => ({
        name,
        ka: openKeepalive(client, { namespace: n, serviceId: "s", schema: "http", host: name, port: 1, ttl }),
      }));
      await expect.poll(() => streams.map((s) => s.ka.answers[0]?.instanceId), { timeout: 5000 }).toEqual(["s@http#grpc#1", "s@http#connect-h2#1"]);
      expect(await list(n, "s")).toEqual(["connect-h2", "grpc"]);

      // Ten renewals by the server on its own (every third of a ttl: over three ttls), however long a busy machine
      // makes them take; both stay listed all along, checked every 100 ms.
      while (streams.some((s) => s.ka.answers.length < 11)) {
        expect(await list(n, "s")).toEqual(["connect-h2", "grpc"]);
        await new Promise((r) => setTimeout(r, 100));
      }

      // A ping renews at once and is answered with the new expiry.
      const [grpc] = streams;
      const before = grpc.ka.answers.length;
      const pinged = Date.now();
      grpc.ka.ping();
      await expect.poll(() => grpc.ka.answers.length, { timeout: 2000, interval: 5 }).toBeGreaterThan(before);
      expect(Number(grpc.ka.answers.at(-1)!.ttlAt!.seconds) * 1000).toBeGreaterThanOrEqual(Math.floor((pinged + TTL_MS) / 1000) * 1000 - 1000);

      // Graceful end: not deregistered at once; gone about one ttl after the end.
      const ended = Date.now();
      for (const s of streams) s.ka.end();
      for (const s of streams) expect(await s.ka.done, s.name).toBeUndefined();
      expect(await list(n, "s")).toEqual(["connect-h2", "grpc"]);
      await expect.poll(() => list(n, "s"), { timeout: 3 * TTL_MS, interval: 20 }).toEqual([]);
      const gone = Date.now() - ended;
      expect(gone).toBeGreaterThanOrEqual(0.9 * TTL_MS);
      expect(gone).toBeLessThan(TTL_MS + 1000);
    }, 20_000);

    it("the client process is killed: the instance stays until one ttl later, then expires", async () => {
      const n = ns("kill");
      const child = spawn(process.execPath, ["--conditions=@gov/source", "--import", "tsx", CHILD, grpcUrl, n, "s", "child", String(TTL_MS / 1000)], { stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout.on("data", (c: Buffer) => void (out += c.toString()));
      child.stderr.on("data", (c: Buffer) => void (err += c.toString()));
      const exited = new Promise<void>((r) => child.once("exit", () => r()));
      try {
        await expect.poll(() => out + err, { timeout: 30_000, interval: 50 }).toMatch(/beat \d+\n/); // registered and renewed once
        expect(out).toMatch(/^registered s@http#child#1\n/);
        expect(await list(n, "s")).toEqual(["child"]);
      } finally {
        child.kill("SIGKILL");
        await exited;
      }
      const killed = Date.now();
      expect(await list(n, "s")).toEqual(["child"]); // a vanished client is not dropped at once
      await expect.poll(() => list(n, "s"), { timeout: 3 * TTL_MS, interval: 20 }).toEqual([]);
      const gone = Date.now() - killed;
      expect(gone).toBeGreaterThanOrEqual(0.9 * TTL_MS);
      expect(gone).toBeLessThan(TTL_MS + 1000);
    }, 40_000);

    it("refuses a stream without a registration, a fixed instance and a second registration, each with how to fix it", async () => {
      const [{ client }] = transports();
      const n = ns("bad");
      const noRegister = openKeepalive(client, undefined);
      const fixed = openKeepalive(client, { namespace: n, serviceId: "s", schema: "http", host: "f", port: 1, isEphemeral: false });
      const badPort = openKeepalive(client, { namespace: n, serviceId: "s", schema: "http", host: "p", port: 0 });
      for (const [ka, text] of [
        [noRegister, /first keepalive message must carry `register`/],
        [fixed, /keeps an ephemeral instance alive/],
        [badPort, /1 to 65535/],
      ] as const) {
        const e = await ka.done;
        expect([e?.code, e?.rawMessage]).toEqual([Code.InvalidArgument, expect.stringMatching(text)]);
      }
      const twice = openKeepalive(client, { namespace: n, serviceId: "s", schema: "http", host: "t", port: 1, ttl });
      await expect.poll(() => twice.answers.length, { timeout: 5000 }).toBe(1);
      twice.send(create(KeepaliveRequestSchema, { register: { namespace: n, serviceId: "s", schema: "http", host: "u", port: 1 } }));
      const e = await twice.done;
      expect([e?.code, e?.rawMessage]).toEqual([Code.InvalidArgument, expect.stringMatching(/only the first keepalive message carries `register`/)]);
      expect(await list(n, "s")).toEqual(["t"]); // the first registration stands and expires by itself
    });

    it("hostile input on the h2c listener: garbage is invalid_argument, an over-size message is refused before it arrives", async () => {
      const garbage = envelope(new Uint8Array([0x0f, 0xff, 0xff, 0xff]));
      expect(await rawH2Call(grpcUrl, "application/grpc+proto", garbage)).toMatchObject({ grpcStatus: "3", message: expect.stringMatching(/not a valid .*RegisterInstanceRequest|not a valid .*KeepaliveRequest/) });
      const connect = await rawH2Call(grpcUrl, "application/connect+proto", garbage);
      expect(JSON.parse(connect.data.slice(connect.data.lastIndexOf("{\"error\"")))).toMatchObject({ error: { code: "invalid_argument" } });
      // Only the 5-byte prefix claiming the size is sent: the limit must hold before the bytes arrive.
      const big = await rawH2Call(grpcUrl, "application/grpc+proto", envelope(new Uint8Array(0), 2 * 1024 * 1024));
      expect(big).toMatchObject({ grpcStatus: "8", message: expect.stringMatching(/limit of \d+ bytes \(/) });
    });

    it("an instance re-registered as fixed while its keepalive is open: the beats after carry no ttlAt (it never expires)", async () => {
      const [{ client }] = transports();
      const n = ns("fixed");
      const ka = openKeepalive(client, { namespace: n, serviceId: "s", schema: "http", host: "f", port: 1, ttl });
      await expect.poll(() => ka.answers.length, { timeout: 5000 }).toBe(1);
      expect(ka.answers[0].ttlAt).toBeDefined();
      await client.registerInstance({ namespace: n, serviceId: "s", schema: "http", host: "f", port: 1, isEphemeral: false });
      const seen = ka.answers.length;
      ka.ping();
      await expect.poll(() => ka.answers.length, { timeout: 5000 }).toBeGreaterThan(seen);
      expect(ka.answers.at(-1)!.ttlAt).toBeUndefined(); // one ttl from now was made up for it, beat after beat
      ka.end();
      await ka.done;
      expect(await list(n, "s")).toEqual(["f"]);
    });

    it("ends the stream with not_found when the instance is deregistered while it is kept alive", async () => {
      const [{ client }] = transports();
      const n = ns("dereg");
      const ka = openKeepalive(client, { namespace: n, serviceId: "s", schema: "http", host: "d", port: 1, ttl });
      await expect.poll(() => ka.answers.length, { timeout: 5000 }).toBe(1);
      await client.deregisterInstance({ namespace: n, serviceId: "s", instanceId: "s@http#d#1" });
      const e = await ka.done;
      expect([e?.code, e?.rawMessage]).toEqual([Code.NotFound, expect.stringMatching(/deregistered or expired while its keepalive was open: open a new keepalive/)]);
      expect(await list(n, "s")).toEqual([]);
    });
  });
}

describe("keepalive over HTTP/1.1", () => {
  let gw: RegistryGateway;
  let url: string;
  beforeAll(async () => {
    gw = await createRegistryGateway(await storeTargets()[0].open());
    ({ url } = await gw.listen());
  });
  afterAll(async () => gw?.close());

  const needsHttp2 = /Keepalive is a bidirectional stream and needs HTTP\/2.*call it over gRPC, or Connect over HTTP\/2, on the gRPC port/;
  const post = (contentType: string) =>
    fetch(`${url}/gov.registry.v1.RegistryService/Keepalive`, { method: "POST", headers: { "content-type": contentType }, body: envelope(new TextEncoder().encode("{}")) });

  it("is refused in each protocol's error shape, saying it needs HTTP/2 and where to get it, instead of a bare 505", async () => {
    // Connect streaming: the error is the end-of-stream message.
    let res = await post("application/connect+json");
    expect([res.status, res.headers.get("connection")]).toEqual([200, "close"]);
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(bytes[0]).toBe(0x02);
    expect(JSON.parse(new TextDecoder().decode(bytes.subarray(5)))).toEqual({ error: { code: "failed_precondition", message: expect.stringMatching(needsHttp2) } });
    // gRPC-Web: grpc-status 9 (failed_precondition) in the trailer frame.
    res = await post("application/grpc-web+proto");
    const trailer = new TextDecoder().decode(new Uint8Array(await res.arrayBuffer()).subarray(5));
    expect(trailer).toMatch(/grpc-status: 9\r\n/);
    expect(decodeURIComponent(/grpc-message: (.*)\r\n/.exec(trailer)![1])).toMatch(needsHttp2);
    // Anything else (curl, plain JSON): the contract's {code, message} with failed_precondition's 412.
    res = await post("application/json");
    expect([res.status, res.headers.get("content-type"), await res.json()]).toEqual([412, "application/json", { code: "failed_precondition", message: expect.stringMatching(needsHttp2) }]);
  });

  it("a Connect client configured for HTTP/1.1 gets failed_precondition with the same message", async () => {
    const client = createClient(RegistryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" }));
    const ka = openKeepalive(client, { namespace: ns("h1"), serviceId: "s", schema: "http", host: "h", port: 1, ttl });
    const e = await ka.done;
    expect([e?.code, e?.rawMessage]).toEqual([Code.FailedPrecondition, expect.stringMatching(needsHttp2)]);
    expect(ka.answers).toEqual([]);
  });
});

describe("keepalive while the registry shuts down", () => {
  it("the stream ends with unavailable and the instance is left to expire one ttl later, for another replica to keep", async () => {
    const store = await storeTargets()[0].open(); // embedded: it outlives the process that owned it only in this test
    const closeStore = store.close;
    store.close = async () => {}; // keep the data readable after the shutdown
    const gw = await createRegistryGateway(store);
    const { grpcUrl } = await gw.listen();
    const n = ns("shutdown");
    const ka = openKeepalive(createClient(RegistryService, createGrpcTransport({ baseUrl: grpcUrl })), { namespace: n, serviceId: "s", schema: "http", host: "h", port: 1, ttl });
    await expect.poll(() => ka.answers.length, { timeout: 5000 }).toBe(1);
    const closing = Date.now();
    await gw.close();
    expect(Date.now() - closing).toBeLessThan(3000); // the open keepalive does not hold the shutdown for its grace
    expect((await ka.done)?.code).toBe(Code.Unavailable);
    const live = async () => (await store.listInstances(n, "s", Date.now())).map((i) => i.host);
    expect(await live()).toEqual(["h"]);
    await expect.poll(live, { timeout: 3 * TTL_MS, interval: 20 }).toEqual([]);
    expect(Date.now() - closing).toBeGreaterThanOrEqual(0.6 * TTL_MS); // at worst a third of a ttl early (see README)
    await closeStore();
  });
});
