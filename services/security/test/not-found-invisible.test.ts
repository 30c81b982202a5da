import { describe, expect, it } from "vitest";
import { sharedRootSession } from "./harness.js";

const seg = encodeURIComponent;

// A 404 for "root" + U+200B printed the name raw: the message read as if the super user did not exist. Characters that
// would not show are written out (`\u200b`), as the namespace and service-id checks do.
describe("a user or role that does not exist is named with its invisible characters written out", () => {
  const session = sharedRootSession();

  it.each([
    ["a user", "DELETE", `/v1/users/${seg("root\u200b")}`, 'user "root\\u200b" does not exist'],
    ["a user, locked", "PUT", `/v1/users/${seg("root\u2060")}/lock`, 'user "root\\u2060" does not exist'],
    ["a role", "DELETE", `/v1/roles/${seg("admin\u200b")}`, 'role "admin\\u200b" does not exist'],
  ])("%s", async (_what, method, url, message) => {
    const { p, root } = session;
    const res = await p.rest(method as "GET", url, { token: root });
    expect([res.status, res.body]).toEqual([404, { code: "not_found", message }]);
  });
});
