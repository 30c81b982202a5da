import { describe, expect, it } from "vitest";
import { CallerHeaders } from "../src/transport/caller-headers.js";

describe("CallerHeaders.get answers what Headers answers, read lazily or not", () => {
  const inits: Record<string, string>[] = [
    { authorization: "Bearer abc.def.ghi", "x-forwarded-for": "127.0.0.1" },
    { Authorization: "Bearer upper-case-key" },
    { authorization: "Bearer one", Authorization: "Bearer two" }, // Headers joins them
    { authorization: "  padded value \t" },
    { authorization: "inner  spaces ok" },
    { authorization: "" },
  ];
  for (const init of inits) {
    it(JSON.stringify(init), () => {
      for (const name of ["authorization", "Authorization", "x-forwarded-for", "missing"]) {
        expect(new CallerHeaders(init).get(name), name).toBe(new Headers(init).get(name));
      }
    });
  }
  it("an invalid value still throws when read, as Headers would at construction", () => {
    expect(() => new Headers({ a: "é\u0100" })).toThrow();
    expect(() => new CallerHeaders({ a: "é\u0100" }).get("a")).toThrow();
  });
});
