import { StoreUnavailableError, WriteOutcomeUnknownError } from "@gov/service-kit";
import type { ConfigOp } from "./config-store.js";

/**
 * What a failed Redis write tells the caller. A write that never left this process (client not connected, server
 * refused it unexecuted) wrote nothing: plain `unavailable`. A write that was sent and then got no answer (command
 * timeout on a paused server, connection reset while in flight) may have been applied: the caller is told that the
 * outcome is unknown and how to find out, rather than "retry".
 */

/** Failures that prove the command was not executed: it was never written to a socket, or the server refused it. */
const NOT_SENT_MESSAGES = /Stream isn't writeable|isn't ready and enableOfflineQueue|None of startup nodes|Failed to refresh slots cache|^(CLUSTERDOWN|LOADING|MASTERDOWN|TRYAGAIN)\b/i;
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

function provesNotSent(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && NOT_SENT_CODES.has(code)) return true;
  if (err.name === "ClusterAllFailedError") return true;
  return NOT_SENT_MESSAGES.test(err.message);
}

export interface WriteTarget {
  op: ConfigOp;
  namespace: string;
  configId: string;
}

const OP_NOUNS: Record<ConfigOp, string> = { set: "write", rollback: "rollback", remove: "delete" };

/** How to learn a write's outcome, per operation; paths are the REST API's, RPC names in parentheses. */
function howToCheck({ op, namespace, configId }: WriteTarget): string {
  const path = `/v1/namespaces/${encodeURIComponent(namespace)}/configs/${encodeURIComponent(configId)}`;
  switch (op) {
    case "set":
      return `read the config (GET ${path}, or GetConfig) and compare its hash with the SHA-256 of your content before retrying; sending the same content again is safe, it answers false when that content is already current`;
    case "rollback":
      return `read the config (GET ${path}, or GetConfig) and its versions (GET ${path}/versions, or ListConfigVersions) to see whether the rollback wrote a new version before retrying`;
    case "remove":
      return `read the config (GET ${path}, or GetConfig): not_found means it was removed`;
  }
}

/**
 * Rewrites a store failure of a write. `maySend`: the client was connected when the write was issued, or would queue
 * it until it is; otherwise it cannot have sent it. Returns `err` unchanged when it is not a store outage.
 */
export function describeWriteFailure(err: unknown, maySend: boolean, target: WriteTarget): unknown {
  if (!(err instanceof StoreUnavailableError) || err instanceof WriteOutcomeUnknownError) return err;
  const what = `the ${OP_NOUNS[target.op]} of config "${target.configId}" in namespace "${target.namespace}"`;
  if (maySend && !provesNotSent(err.cause)) {
    const cause = err.cause instanceof Error ? err.cause.message : String(err.cause);
    return new WriteOutcomeUnknownError(
      `${what} was sent to Redis but got no answer (${cause}), so it may or may not have been applied: ${howToCheck(target)}`,
      { cause: err.cause },
    );
  }
  const message = /retry when it is back$/.test(err.message)
    ? err.message.replace(/retry when it is back$/, "nothing was written; retry when it is back")
    : `${err.message}; nothing was written`;
  return new StoreUnavailableError(message, { cause: err.cause });
}
