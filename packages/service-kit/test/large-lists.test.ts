// The joined encodings of long lists (large-lists.ts): the same bytes and JSON as the ordinary serializers, made in
// turns of the event loop.
import { create, fromBinary, toBinary, toJson, toJsonString } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { createClient, createRouterTransport, type StreamResponse, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { ListConfigsResponseSchema } from "@gov/api/gen/gov/config/v1/config_pb";
import { InstanceSchema, ListInstancesResponseSchema, RegistryService, WatchInstancesResponseSchema, WatchServicesResponseSchema, type Instance } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { describe, expect, it } from "vitest";
import { CONNECT_JSON_OPTIONS } from "../src/connect-unary.js";
import { jsonArrayInTurns, jsonTexts, LARGE_LIST, largeListsSerialization, mapInTurns, prepareLargeLists, sortInTurns } from "../src/index.js";
import { binaryElement, binaryInTurns, fromBinaryInTurns, withEncodedLists } from "../src/large-lists.js";

const instances = (n: number, tag = ""): Instance[] =>
  Array.from({ length: n }, (_, k) =>
    create(InstanceSchema, {
      instanceId: `order${tag}@http#10.0.${k >> 8}.${k & 255}#8080`,
      serviceId: "order",
      schema: "http",
      host: `10.0.${k >> 8}.${k & 255}`,
      port: 8080,
      weight: k % 3,
      isEphemeral: k % 2 === 0,
      ttlAt: k % 2 === 0 ? timestampFromMs(1_800_000_000_000 + k) : undefined,
      metadata: k % 5 ? { zone: "a", "ü": "ß" } : {},
    }),
  );

describe("long lists of messages, encoded from their elements", () => {
  it("protobuf: the bytes toBinary writes when the list is the last field, and the same message decoded when it is not", () => {
    const list = create(ListInstancesResponseSchema, { instances: instances(LARGE_LIST + 5) });
    const joined = withEncodedLists(ListInstancesResponseSchema, list);
    expect(joined).not.toBe(list);
    expect(list.instances).toHaveLength(LARGE_LIST + 5); // the original is left as it was
    expect(Buffer.from(toBinary(ListInstancesResponseSchema, joined)).equals(Buffer.from(toBinary(ListInstancesResponseSchema, list)))).toBe(true);

    // instances (field 5) comes before nothing here, but op and service_id (1, 2) and instance (4) are set too
    const watch = create(WatchInstancesResponseSchema, { op: "current", serviceId: "order", instanceId: "x", instance: instances(1)[0], instances: instances(LARGE_LIST * 2, "w") });
    const decoded = fromBinary(WatchInstancesResponseSchema, toBinary(WatchInstancesResponseSchema, withEncodedLists(WatchInstancesResponseSchema, watch)));
    expect(toJson(WatchInstancesResponseSchema, decoded)).toEqual(toJson(WatchInstancesResponseSchema, watch));
  });

  it("protobuf: a short list, and a message with other unknown fields, pass as they are or keep those fields", () => {
    const short = create(ListInstancesResponseSchema, { instances: instances(LARGE_LIST - 1) });
    expect(withEncodedLists(ListInstancesResponseSchema, short)).toBe(short);
    const carried = fromBinary(ListInstancesResponseSchema, new Uint8Array([0x98, 0x06, 0x07])); // field 99, varint 7
    carried.instances = instances(LARGE_LIST);
    const back = fromBinary(ListInstancesResponseSchema, toBinary(ListInstancesResponseSchema, withEncodedLists(ListInstancesResponseSchema, carried)));
    expect(back.instances).toHaveLength(LARGE_LIST);
    expect(back.$unknown).toEqual([{ no: 99, wireType: 0, data: new Uint8Array([7]) }]);
  });

  it("an element's encoding is made once per message", () => {
    const [a] = instances(1);
    expect(binaryElement(InstanceSchema, a)).toBe(binaryElement(InstanceSchema, a));
    const texts = jsonTexts({});
    expect(texts.message(InstanceSchema, a)).toBe(texts.message(InstanceSchema, a));
  });

  it("JSON: the same object as toJson, with and without implicit values", () => {
    const watch = create(WatchInstancesResponseSchema, { op: "current", serviceId: "order", instances: instances(LARGE_LIST + 1) });
    for (const options of [{}, { alwaysEmitImplicit: true }]) {
      const texts = jsonTexts(options);
      expect(JSON.parse(texts.whole(WatchInstancesResponseSchema, watch))).toEqual(toJson(WatchInstancesResponseSchema, watch, options));
      expect(JSON.parse(texts.list(InstanceSchema, watch.instances))).toEqual(watch.instances.map((i) => toJson(InstanceSchema, i, options)));
      const empty = create(WatchInstancesResponseSchema, {});
      expect(JSON.parse(texts.whole(WatchInstancesResponseSchema, empty))).toEqual(toJson(WatchInstancesResponseSchema, empty, options));
    }
  });

  it("a long list is prepared in turns: other work runs in between, and nothing is left to do for a short one", async () => {
    expect(prepareLargeLists(ListInstancesResponseSchema, create(ListInstancesResponseSchema, { instances: instances(10) }), binaryElement)).toBeUndefined();
    const big = create(ListInstancesResponseSchema, { instances: instances(20_000, "big") });
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    try {
      await prepareLargeLists(ListInstancesResponseSchema, big, binaryElement);
    } finally {
      clearInterval(ticker);
    }
    // 20,000 protobuf encodings take well over 5 ms anywhere: the loop must have turned while they were made
    expect(turns).toBeGreaterThan(0);
    expect(Array.isArray(mapInTurns([1, 2], (x) => x * 2))).toBe(true);
    expect(await mapInTurns(Array.from({ length: LARGE_LIST }, (_, i) => i), (x) => x * 2)).toEqual(Array.from({ length: LARGE_LIST }, (_, i) => i * 2));
  });

  it("sortInTurns and jsonArrayInTurns: toSorted's order and JSON.stringify's text, in turns for a long list", async () => {
    // duplicates, escapes, non-ASCII and astral characters (UTF-16 code unit order: "\u{1F600}" sorts before "\uFFFD")
    const words = ["b", "a", "a", 'q"uote', "back\\slash", "\u0000nul", "é", "\u{1F600}", "\uFFFD", "", "Z", "line\nbreak"];
    const many = Array.from({ length: 20_000 }, (_, i) => `${words[(i * 7) % words.length]}${(i * 7919) % 1000}`);
    expect(sortInTurns(words)).toEqual(words.toSorted());
    const sorting = sortInTurns(many);
    expect(sorting).toBeInstanceOf(Promise);
    expect(await sorting).toEqual(many.toSorted());
    expect(jsonArrayInTurns(words)).toBe(JSON.stringify(words));
    const writing = jsonArrayInTurns(many);
    expect(writing).toBeInstanceOf(Promise);
    expect(await writing).toBe(JSON.stringify(many));
    expect(await jsonArrayInTurns(Array.from({ length: LARGE_LIST }, (_, i) => i % 2 === 0))).toBe(JSON.stringify(Array.from({ length: LARGE_LIST }, (_, i) => i % 2 === 0)));
  });

  it("decoding: a long list comes back in turns, equal to fromBinary's; a short answer is decoded at once", async () => {
    const watch = create(WatchInstancesResponseSchema, { op: "current", serviceId: "order", instanceId: "x", instance: instances(1)[0], instances: instances(3000, "d") });
    const bytes = toBinary(WatchInstancesResponseSchema, watch);
    const decoded = fromBinaryInTurns(WatchInstancesResponseSchema, bytes);
    expect(decoded).toBeInstanceOf(Promise);
    expect(toJson(WatchInstancesResponseSchema, await decoded)).toEqual(toJson(WatchInstancesResponseSchema, fromBinary(WatchInstancesResponseSchema, bytes)));
    const small = toBinary(ListInstancesResponseSchema, create(ListInstancesResponseSchema, { instances: instances(3) }));
    expect(fromBinaryInTurns(ListInstancesResponseSchema, small)).not.toBeInstanceOf(Promise);
    const many = create(ListInstancesResponseSchema, { instances: instances(LARGE_LIST * 3, "m") });
    const manyBytes = Buffer.concat([Buffer.from(toBinary(ListInstancesResponseSchema, many)), Buffer.from([0x98, 0x06, 0x07])]);
    // an unknown field is kept, as fromBinary keeps it
    const back = await fromBinaryInTurns(ListInstancesResponseSchema, manyBytes);
    expect(back.instances.map((i) => i.instanceId)).toEqual(many.instances.map((i) => i.instanceId));
    expect(back.$unknown).toEqual([{ no: 99, wireType: 0, data: new Uint8Array([7]) }]);
  });

  it("Connect-ES in JSON: a long list arrives whole, in unary answers and streams, through the stand-in and its text encoder", async () => {
    const large = largeListsSerialization(CONNECT_JSON_OPTIONS);
    const list = create(ListInstancesResponseSchema, { instances: instances(LARGE_LIST * 2, "c") });
    const watch = create(WatchInstancesResponseSchema, { op: "current", serviceId: "order", hash: "h", instances: instances(LARGE_LIST + 3, "w") });
    const others = [create(WatchInstancesResponseSchema, { op: "deregister", instanceId: "x", hash: "g" }), create(WatchInstancesResponseSchema, { op: "resync", instances: [] })];
    const transport = createRouterTransport(
      (router) =>
        router.service(RegistryService, {
          listInstances: () => list,
          async *watchInstances() {
            yield watch;
            yield* others;
            yield watch;
          },
        }),
      { router: { interceptors: [large.interceptor], jsonOptions: large.jsonOptions }, transport: { useBinaryFormat: false } },
    );
    const client = createClient(RegistryService, transport);
    const json = (desc: typeof WatchInstancesResponseSchema | typeof ListInstancesResponseSchema, m: never) => toJson(desc, m);
    expect(json(ListInstancesResponseSchema, (await client.listInstances({ namespace: "{a}", serviceId: "order" })) as never)).toEqual(json(ListInstancesResponseSchema, list as never));
    const received = [];
    for await (const m of client.watchInstances({ namespace: "{a}", serviceId: "order" })) received.push(json(WatchInstancesResponseSchema, m as never));
    expect(received).toEqual([watch, ...others, watch].map((m) => json(WatchInstancesResponseSchema, m as never)));
  });

  it("a stand-in's lists read outside an encode (a serialization that failed) leave the next text as it is", async () => {
    const large = largeListsSerialization(CONNECT_JSON_OPTIONS);
    const list = create(ListInstancesResponseSchema, { instances: instances(LARGE_LIST, "s") });
    const req = { header: new Headers({ "content-type": "application/json" }), requestMethod: "POST", url: "http://connect/x", method: { output: ListInstancesResponseSchema }, stream: false };
    const res = (await large.interceptor(async () => ({ stream: false, message: list }) as unknown as UnaryResponse)(req as unknown as UnaryRequest)) as UnaryResponse;
    const standIn = res.message as unknown as { instances: unknown[] };
    expect(standIn).not.toBe(list);
    expect(standIn.instances).toEqual([]); // as toJson reads it, which then fails, say
    await Promise.resolve();
    expect(new TextDecoder().decode(large.jsonOptions.textEncoder.encode('{"a":1}'))).toBe('{"a":1}');
    // and a content type it does not know passes the answer untouched
    const other = (await large.interceptor(async () => ({ stream: false, message: list }) as unknown as UnaryResponse)({ ...req, header: new Headers({ "content-type": "text/plain" }) } as unknown as UnaryRequest)) as UnaryResponse | StreamResponse;
    expect(other.message).toBe(list);
  });
});

describe("long lists of strings, encoded in slices", () => {
  // empty, non-ASCII and long ids too; more than one slice of the encoders
  const ids = (n: number, tag = "") => Array.from({ length: n }, (_, k) => (k % 1000 === 7 ? "" : k % 3 ? `${tag}svc-${k}` : `${tag}ü/ß€😀-${k}-${"x".repeat(k % 200)}`));

  it("protobuf: toBinary's bytes when the list is the only or last field, the same message decoded otherwise; short lists pass", async () => {
    const list = create(ListConfigsResponseSchema, { configIds: ids(10_000) });
    const ready = binaryInTurns(ListConfigsResponseSchema, list);
    expect(ready).toBeInstanceOf(Promise);
    const joined = await ready!;
    expect(list.configIds).toHaveLength(10_000); // the original is left as it was
    expect(Buffer.from(toBinary(ListConfigsResponseSchema, joined)).equals(Buffer.from(toBinary(ListConfigsResponseSchema, list)))).toBe(true);

    const watch = create(WatchServicesResponseSchema, { op: "current", serviceId: "s", serviceIds: ids(LARGE_LIST, "w"), hash: "h" });
    const decoded = fromBinary(WatchServicesResponseSchema, toBinary(WatchServicesResponseSchema, (await binaryInTurns(WatchServicesResponseSchema, watch))!));
    expect(toJson(WatchServicesResponseSchema, decoded)).toEqual(toJson(WatchServicesResponseSchema, watch));

    expect(binaryInTurns(ListConfigsResponseSchema, create(ListConfigsResponseSchema, { configIds: ids(LARGE_LIST - 1) }))).toBeUndefined();
  });

  it("decoding: a long list of strings comes back in turns, equal to fromBinary's, the other fields with it", async () => {
    const list = toBinary(ListConfigsResponseSchema, create(ListConfigsResponseSchema, { configIds: ids(10_000) }));
    const decoded = fromBinaryInTurns(ListConfigsResponseSchema, list);
    expect(decoded).toBeInstanceOf(Promise);
    expect((await decoded).configIds).toEqual(fromBinary(ListConfigsResponseSchema, list).configIds);
    const watch = create(WatchServicesResponseSchema, { op: "current", serviceId: "s", serviceIds: ids(2_000, "w"), hash: "h" });
    const bytes = toBinary(WatchServicesResponseSchema, watch);
    expect(toJson(WatchServicesResponseSchema, await fromBinaryInTurns(WatchServicesResponseSchema, bytes))).toEqual(toJson(WatchServicesResponseSchema, watch));
  });

  it("JSON: wholeInTurns writes toJson's object; Connect-ES's answers arrive whole through the stand-in", async () => {
    const list = create(ListConfigsResponseSchema, { configIds: ids(10_000) });
    const watch = create(WatchServicesResponseSchema, { op: "current", serviceId: "s", serviceIds: ids(LARGE_LIST + 1, "w"), hash: "h" });
    for (const options of [{}, { alwaysEmitImplicit: true }]) {
      const texts = jsonTexts(options);
      expect(JSON.parse((await texts.wholeInTurns(ListConfigsResponseSchema, list))!.toString())).toEqual(toJson(ListConfigsResponseSchema, list, options));
      expect(JSON.parse((await texts.wholeInTurns(WatchServicesResponseSchema, watch))!.toString())).toEqual(toJson(WatchServicesResponseSchema, watch, options));
    }
    expect((await jsonTexts({}).wholeInTurns(ListConfigsResponseSchema, list))!.toString()).toBe(toJsonString(ListConfigsResponseSchema, list));

    const large = largeListsSerialization(CONNECT_JSON_OPTIONS);
    const others = [create(WatchServicesResponseSchema, { op: "add", serviceId: "t", hash: "g" })];
    const transport = createRouterTransport(
      (router) =>
        router.service(RegistryService, {
          async *watchServices() {
            yield watch;
            yield* others;
            yield watch;
          },
        }),
      { router: { interceptors: [large.interceptor], jsonOptions: large.jsonOptions }, transport: { useBinaryFormat: false } },
    );
    const received = [];
    for await (const m of createClient(RegistryService, transport).watchServices({ namespace: "{a}" })) received.push(toJson(WatchServicesResponseSchema, m));
    expect(received).toEqual([watch, ...others, watch].map((m) => toJson(WatchServicesResponseSchema, m)));
  });
});
