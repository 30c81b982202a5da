import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigService } from "@gov/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestGateway, ns, seg, type TestGateway } from "./harness.js";

/**
 * gov.limits.open-watches: a process holds at most that many watches open, over every protocol together; one more is
 * refused before it starts, and a watch that ends — its client left, or it never read a message — frees its place.
 */
describe("the open-watches limit", () => {
  const gateways: TestGateway[] = [];
  afterAll(() => Promise.all(gateways.map((g) => g.close())));
  /** A gateway holding at most two watches open. */
  const limitedToTwo = async () => {
    const gw = await createTestGateway(undefined, undefined, true, { GOV_LIMITS_OPEN_WATCHES: "2" });
    gateways.push(gw);
    return gw.listen();
  };

  /** Opens a REST watch; once it is open (200), reads its first message unless told not to. */
  const openSse = async (url: string, read = true) => {
    const ac = new AbortController();
    const res = await fetch(`${url}/watch`, { signal: ac.signal });
    if (res.ok && read) await res.body!.getReader().read(); // the first message: the watch is open
    return { res, close: () => ac.abort() };
  };

  it("a third watch is refused over REST (429) and Connect (resource_exhausted), naming the setting; a closed one frees its place", async () => {
    const urls = await limitedToTwo();
    const config = `${urls.url}/v1/namespaces/${seg(ns("lim"))}/configs/a.yaml`;
    const first = await openSse(config);
    expect(first.res.status).toBe(200);
    const grpc = createClient(ConfigService, createGrpcTransport({ baseUrl: urls.grpcUrl }));
    const ac = new AbortController();
    const second = grpc.watchConfig({ namespace: ns("lim"), configId: "b" }, { signal: ac.signal })[Symbol.asyncIterator]();
    await second.next();

    // what an operator watches to see the limit coming
    expect(await (await fetch(`${urls.managementUrl}/metrics`)).text()).toMatch(/^gov_open_watches 2$/m);

    const third = await openSse(config);
    expect(third.res.status).toBe(429);
    const body = (await third.res.json()) as { code: string; message: string };
    expect(body.code).toBe("resource_exhausted");
    expect(body.message).toContain("gov.limits.open-watches");
    const connect = createClient(ConfigService, createConnectTransport({ baseUrl: urls.url, httpVersion: "1.1" }));
    await expect(connect.watchConfig({ namespace: ns("lim"), configId: "c" })[Symbol.asyncIterator]().next()).rejects.toMatchObject({
      rawMessage: expect.stringContaining("too many open watches"),
      code: 8, // resource_exhausted
    });

    // the REST watch's client leaves: its place is free again once the server notices the closed connection
    first.close();
    await expect
      .poll(async () => {
        const again = await openSse(config);
        again.close();
        return again.res.status;
      }, { timeout: 10_000 })
      .toBe(200);
    ac.abort();
    await second.next().catch(() => undefined);
  });

  it("watches whose clients leave before reading anything free their places too", async () => {
    const urls = await limitedToTwo();
    const config = `${urls.url}/v1/namespaces/${seg(ns("lim"))}/configs/d.yaml`;
    for (let i = 0; i < 6; i++) {
      const left = await openSse(config, false);
      left.close();
    }
    // both places free again: two watches open side by side
    await expect
      .poll(async () => {
        const [a, b] = [await openSse(config), await openSse(config)];
        a.close();
        b.close();
        return [a.res.status, b.res.status];
      }, { timeout: 10_000 })
      .toEqual([200, 200]);
  });
});
