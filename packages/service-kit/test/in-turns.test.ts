// sortInTurns and the JSON bytes of large answers made in turns (jsonTexts' wholeInTurns, listInTurns): the same result
// as their one-piece forms.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { InstanceSchema, ListInstancesResponseSchema, WatchInstancesResponseSchema } from "@gov/api/gen/gov/registry/v1/registry_pb";
import { describe, expect, it } from "vitest";
import { jsonTexts, LARGE_LIST, sortInTurns } from "../src/index.js";

describe("sortInTurns", () => {
  it("sorts as Array.prototype.sort does, stably, short lists at once and long ones as a promise", async () => {
    const short = [3, 1, 2];
    expect(sortInTurns(short, (a, b) => a - b)).toEqual([1, 2, 3]);
    for (const n of [LARGE_LIST, 1024, 1025, 5_000, 40_000]) {
      const items = Array.from({ length: n }, (_, i) => ({ key: `k${(i * 7919) % 1000}`, i }));
      const expected = items.slice().sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const sorted = sortInTurns(items, (a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      expect(sorted).toBeInstanceOf(Promise);
      expect(await sorted).toEqual(expected); // ties keep their order: stable
      expect(items).toEqual(expected); // in place
    }
  });
});

describe("JSON bytes of large answers, made in turns", () => {
  const texts = jsonTexts({});
  const instances = Array.from({ length: 3 * LARGE_LIST }, (_, k) =>
    create(InstanceSchema, { instanceId: `svc@http#10.0.0.${k}#80`, serviceId: "svc", port: 80, weight: k % 3, ttlAt: timestampFromMs(1_000 + k), metadata: { zone: "ä\u2028" } }),
  );

  it("are the bytes of whole and list, with a prefix and suffix; undefined when no list is large", async () => {
    const watch = create(WatchInstancesResponseSchema, { op: "current", serviceId: "svc", hash: "ab", instances });
    expect((await texts.wholeInTurns(WatchInstancesResponseSchema, watch, "data: ", "\n\n"))!.toString()).toBe(`data: ${texts.whole(WatchInstancesResponseSchema, watch)}\n\n`);
    // a head with no field of its own
    const list = create(ListInstancesResponseSchema, { instances });
    expect((await texts.wholeInTurns(ListInstancesResponseSchema, list))!.toString()).toBe(texts.whole(ListInstancesResponseSchema, list));
    expect((await texts.listInTurns(InstanceSchema, instances))!.toString()).toBe(texts.list(InstanceSchema, instances));
    expect(texts.wholeInTurns(ListInstancesResponseSchema, create(ListInstancesResponseSchema, { instances: instances.slice(0, 3) }))).toBeUndefined();
    expect(texts.listInTurns(InstanceSchema, instances.slice(0, 3))).toBeUndefined();
  });
});
