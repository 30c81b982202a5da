import { createHash, timingSafeEqual } from "node:crypto";

/** Who a management caller is: an admin may do everything, a user may see health details. */
export type ManagementRole = "admin" | "user";

/**
 * The seam for the security module: given the caller's `Authorization` header (maybe undefined), resolve a role, or
 * undefined when the credentials mean nothing to it. Called only when `management.token` did not match.
 */
export type AuthorizeManagement = (authorizationHeader: string | undefined) => Promise<ManagementRole | undefined>;

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * The caller's role: `Bearer <management.token>` → admin (compared in constant time), else whatever the security
 * module's hook says, else anonymous (undefined).
 */
export function managementAuthorizer(token: string | undefined, hook: AuthorizeManagement | undefined): AuthorizeManagement {
  const expected = token === undefined ? undefined : digest(token);
  return async (header) => {
    // the scheme is case-insensitive (RFC 7235): "bearer" is as good as "Bearer"
    if (expected && header !== undefined && /^bearer /i.test(header)) {
      // hashing both sides gives equal lengths, so timingSafeEqual never throws and leaks no length
      if (timingSafeEqual(digest(header.slice(7).trim()), expected)) return "admin";
    }
    if (!hook) return undefined;
    try {
      return await hook(header);
    } catch {
      return undefined; // a hook that fails does not authorize
    }
  };
}
