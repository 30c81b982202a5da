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

describe("registry client: a service id beyond ASCII (valid on the registry: 支付, café)", () => {
  it("discovery fails with the registry's answer, not a TypeError or a crash of the process; the header carries the id in RFC 8187's form", { timeout: 5000 }, async () => {
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
      // ASCII on the wire whatever the HTTP stack; the registry decodes it
      expect(seen).toEqual([{ consumer: "UTF-8''%E6%94%AF%E4%BB%98", namespace: "{dev}" }]);
      // the next call tries again (the failed cache was dropped)
      expect(await client.choose("order").catch((e: unknown) => (e as ConnectError).code)).toBe(Code.Unavailable);
      expect(seen).toHaveLength(2);
      await client.close();
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("a service id in Latin-1 (café) is sent so too (stacks disagree on its bytes), and an ASCII one as it is", async () => {
    const { transport, seen } = unavailableRegistry();
    const client = createRegistryClient({ transport, namespace: "{dev}", serviceId: "café" });
    await client.instances("order").catch(() => {});
    expect(seen[0]).toEqual({ consumer: "UTF-8''caf%C3%A9", namespace: "{dev}" });
    await client.close();
    const ascii = createRegistryClient({ transport, namespace: "{dev}", serviceId: "order-api" });
    await ascii.instances("order").catch(() => {});
    expect(seen[1]).toEqual({ consumer: "order-api", namespace: "{dev}" });
    await ascii.close();
  });
});
