import { describe, expect, it } from "vitest";
import { sharedRootSession } from "./harness.js";

const seg = encodeURIComponent;

// The audit log's from/to are RFC 3339 times: an instant, whatever server answers. Date.parse alone read a time without
// an offset in the server's time zone and rolled a day the month does not have into the next month.
describe("audit log from/to: RFC 3339 instants, or 400", () => {
  const session = sharedRootSession();

  it("refuses days that do not exist and times without an offset, on the query and the export alike", async () => {
    const { p, root } = session;
    for (const path of ["/v1/audit-log", "/v1/audit-log/export"]) {
      for (const [param, value, message] of [
        ["to", "2026-02-30T00:00:00Z", 'to names a day that does not exist (2026-02-30): send a date of the calendar'],
        ["from", "2026-11-31T00:00:00Z", 'from names a day that does not exist (2026-11-31): send a date of the calendar'],
        ["from", "2026-11-28T10:00:00", 'from must be an RFC 3339 time with its offset, such as 2026-11-23T10:00:00Z or 2026-11-23T11:00:00+01:00, not "2026-11-28T10:00:00"'],
        ["to", "2026-11-28T10:00", 'to must be an RFC 3339 time with its offset, such as 2026-11-23T10:00:00Z or 2026-11-23T11:00:00+01:00, not "2026-11-28T10:00"'],
        ["from", "yesterday", 'from must be an RFC 3339 time with its offset, such as 2026-11-23T10:00:00Z or 2026-11-23T11:00:00+01:00, not "yesterday"'],
      ]) {
        const r = await p.rest("GET", `${path}?${param}=${seg(value)}`, { token: root });
        expect([path, value, r.status, r.body], r.text).toEqual([path, value, 400, { code: "invalid_argument", message }]);
      }
    }
  });

  it("takes any offset, and lower-case t and z, as the same instant", async () => {
    const { p, root } = session;
    const { list } = (await p.rest("GET", "/v1/audit-log?limit=1", { token: root })).body as { list: { id: string; opTime: string }[] };
    const at = Date.parse(list[0].opTime);
    const utc = new Date(at).toISOString();
    const plusOne = `${new Date(at + 3_600_000).toISOString().slice(0, 23)}+01:00`;
    const lower = utc.replace("T", "t").replace("Z", "z");
    const ids = async (from: string) => ((await p.rest("GET", `/v1/audit-log?from=${seg(from)}&to=${seg(from)}`, { token: root })).body as { list: { id: string }[] }).list.map((e) => e.id);
    expect(await ids(utc)).toEqual([list[0].id]);
    expect(await ids(plusOne)).toEqual([list[0].id]);
    expect(await ids(lower)).toEqual([list[0].id]);
    expect((await p.rest("GET", `/v1/audit-log?from=${seg("2028-02-29T00:00:00Z")}`, { token: root })).status).toBe(200); // a leap day
  });
});
