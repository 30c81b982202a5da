import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createRegistryClient } from "../src/index.js";

/** A registry that answers every call "unavailable", recording the consumer headers each call carried. */
function unavailableRegistry() {
  const seen: { consumer: string | null; namespace: string | null }[] = [];
  const record = (header: HeadersInit | undefined) => {
    const h = new Headers(header);
    seen.push({ consumer: h.get("x-gov-consumer"), namespace: h.get("x-gov-consumer-namespace") });
  };
  const transport: Transport = {
    unary: async (_m, _s, _t, header) => {
      record(header);
      throw new ConnectError("registry down", Code.Unavailable);
    },
    stream: async (_m, _s, _t, header) => {
      record(header);
      throw new ConnectError("registry down", Code.Unavailable);
    },
  };
  return { transport, seen };
}

describe("registry client: a service id beyond Latin-1 (valid on the registry: 支付)", () => {
  it("discovery fails with the registry's answer, not a TypeError or a crash of the process; the header is left out", { timeout: 5000 }, async () => {
    const { transport, seen } = unavailableRegistry();
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => void unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    try {
      const client = createRegistryClient({ transport, namespace: "{dev}", serviceId: "支付" });
      const outcome = await client.instances("order").catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 50));
      expect(outcome).toBeInstanceOf(ConnectError);
      expect((outcome as ConnectError).code).toBe(Code.Unavailable);
      expect(seen).toEqual([{ consumer: null, namespace: null }]);
      // the next call tries again (the failed cache was dropped)
      expect(await client.choose("order").catch((e: unknown) => (e as ConnectError).code)).toBe(Code.Unavailable);
      expect(seen).toHaveLength(2);
      await client.close();
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("a Latin-1 service id (café) is still sent as it is", async () => {
    const { transport, seen } = unavailableRegistry();
    const client = createRegistryClient({ transport, namespace: "{dev}", serviceId: "café" });
    await client.instances("order").catch(() => {});
    expect(seen[0]).toEqual({ consumer: "café", namespace: "{dev}" });
    await client.close();
  });
});
