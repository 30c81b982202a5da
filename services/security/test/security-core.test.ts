import { describe, expect, it } from "vitest";
import { hashPassword } from "../src/passwords.js";
import { createSecurityCore } from "../src/security-core.js";
import { createMemorySecurityStore } from "../src/store/memory-security-store.js";

const silent = { debug() {}, info() {}, warn() {}, error() {} } as never;
const ACCESS_MS = 15 * 60_000;

/** A core on the embedded store with a clock the test moves, and a logged-in user "ann" (not the super user). */
async function setup() {
  let clock = Date.now();
  const store = createMemorySecurityStore();
  const core = await createSecurityCore({
    store,
    logger: silent,
    now: () => clock,
    settings: { superUsername: "root", enforceInitSuperUser: false, jwtSecret: "x".repeat(32), accessValidity: ACCESS_MS, refreshValidity: 3 * 3_600_000, maxFailures: 10, lockDuration: 900_000 },
  });
  const pw = await hashPassword("ann-password");
  await store.addUser({ username: "ann", ...pw, roles: [], locked: false, lockedUntil: 0, failures: 0 });
  const { accessToken } = await core.login("ann", "ann-password");
  return { core, store, header: `Bearer ${accessToken}`, advance: (ms: number) => (clock += ms) };
}

// The header text of each request is a new string: build one with the same content, as the HTTP parser does.
const fresh = (header: string) => Buffer.from(header).toString("latin1");

describe("security core: the cached caller of a bearer header", () => {
  it("answers a header it verified before, again and again, and stops once the token expires", async () => {
    const { core, header, advance } = await setup();
    expect(core.cachedPrincipal(header)).toBeUndefined(); // not verified yet: the caller takes the async path
    expect((await core.authenticate(header)).username).toBe("ann");
    expect(core.cachedPrincipal(fresh(header))?.username).toBe("ann");
    expect(core.cachedPrincipal(fresh(header))?.username).toBe("ann");
    advance(ACCESS_MS);
    expect(core.cachedPrincipal(fresh(header))).toBeUndefined();
    expect(core.cachedPrincipal(fresh(header))).toBeUndefined();
  });

  it("stops answering for a user locked or deleted since, even for the header it answered last", async () => {
    const { core, store, header } = await setup();
    await core.authenticate(header);
    expect(core.cachedPrincipal(fresh(header))?.username).toBe("ann");
    await store.updateUser("ann", { locked: true });
    expect(core.cachedPrincipal(fresh(header))).toBeUndefined();
    await store.updateUser("ann", { locked: false });
    await core.authenticate(header);
    expect(core.cachedPrincipal(fresh(header))?.username).toBe("ann");
    await store.removeUser("ann");
    expect(core.cachedPrincipal(fresh(header))).toBeUndefined();
  });

  it("does not cache what it read while a change arrived: a user deleted during the read is refused from then on", async () => {
    const { core, store, header } = await setup();
    await store.putRole({ name: "dev", desc: "", bindings: [{ namespace: "{dev}", action: "r" }] });
    await store.updateUser("ann", { roles: ["dev"] });
    // The principal is read in two round trips (the user, then its roles): hold the second until the user is deleted.
    let release!: () => void;
    let reached!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const readingRoles = new Promise<void>((resolve) => (reached = resolve));
    const getRole = store.getRole.bind(store);
    store.getRole = async (name) => {
      reached();
      await held;
      return getRole(name);
    };
    const during = core.authenticate(header);
    await readingRoles;
    await store.removeUser("ann");
    release();
    await during.catch(() => undefined); // read before the delete: it may pass, as a request racing the delete may
    await expect(core.authenticate(header)).rejects.toThrow(/no longer exists/);
    expect(core.cachedPrincipal(fresh(header))).toBeUndefined();
  });

  it("the management listener's outage fallback forgets a user deleted before the outage", async () => {
    const { core, store, header } = await setup();
    expect(await core.managementRole(header)).toBe("user");
    const getUser = store.getUser.bind(store);
    const down = () => {
      store.getUser = async () => {
        throw new Error("the store is unreachable");
      };
    };
    down();
    expect(await core.managementRole(header)).toBe("user"); // the outage: the role as last read
    store.getUser = getUser;
    await store.removeUser("ann");
    down();
    expect(await core.managementRole(header)).toBeUndefined();
  });

  it("tells headers apart: another token, or none, is not the last one's caller", async () => {
    const { core, header } = await setup();
    await core.authenticate(header);
    expect(core.cachedPrincipal(header)?.username).toBe("ann");
    expect(core.cachedPrincipal(`${header.slice(0, -2)}xx`)).toBeUndefined();
    expect(core.cachedPrincipal(null)).toBeUndefined();
    expect(core.cachedPrincipal("Basic abc")).toBeUndefined();
    expect(core.cachedPrincipal(fresh(header))?.username).toBe("ann");
  });
});
