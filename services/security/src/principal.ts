import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { Binding } from "./store/security-store.js";

/** Who is calling, as the authorization interceptor found out (contract §7). */
export interface Principal {
  username: string;
  /** The super user (`gov.super.username`): bypasses RBAC. */
  superUser: boolean;
  /** The super user or a holder of the reserved `admin` role. */
  admin: boolean;
  /** namespace → what its roles allow there (bindings of all its roles merged). */
  grants: ReadonlyMap<string, { r: boolean; w: boolean }>;
}

/** The reserved role that may manage users, roles, the audit log and namespaces. */
export const ADMIN_ROLE = "admin";

/** Set by the authorization interceptor on every call it lets through; undefined when security is off. */
export const principalKey = createContextKey<Principal | undefined>(undefined, { description: "gov.security principal" });

/** The caller of a handler (undefined when security is off: then everyone may do everything). */
export const callerOf = (ctx: Pick<HandlerContext, "values">): Principal | undefined => ctx.values.get(principalKey);

export function principalOf(username: string, superUser: boolean, roles: string[], bindings: Binding[]): Principal {
  const grants = new Map<string, { r: boolean; w: boolean }>();
  for (const b of bindings) {
    const g = grants.get(b.namespace) ?? { r: false, w: false };
    if (b.action.includes("r")) g.r = true;
    if (b.action.includes("w")) g.w = true;
    grants.set(b.namespace, g);
  }
  return { username, superUser, admin: superUser || roles.includes(ADMIN_ROLE), grants };
}

/** Whether `principal` may read (`r`) or write (`w`) `namespace`; undefined principal = security off. */
export function mayAccess(principal: Principal | undefined, namespace: string, need: "r" | "w"): boolean {
  if (!principal || principal.admin) return true;
  return principal.grants.get(namespace)?.[need] === true;
}

/**
 * The namespaces of `all` the caller may read, for `GET /v1/namespaces` (contract §7): everything for an admin or with
 * security off, else those its roles bind with `r`.
 */
export function readableNamespaces(principal: Principal | undefined, all: readonly string[]): string[] {
  return all.filter((ns) => mayAccess(principal, ns, "r"));
}
