import type { FailedWrite } from "@gov/redis";
import type { ConfigOp } from "./config-store.js";

/**
 * What a failed Redis write of a config tells the caller: `@gov/redis` redisWriteCaller decides whether it may have
 * been applied (→ outcome unknown, 504) or surely was not (→ "nothing was written", 503); this file says, per
 * operation, what the write was and how to check it.
 */

/** A write of one config. */
interface ConfigWrite {
  op: ConfigOp;
  namespace: string;
  configId: string;
}

/** What a config store write is, for its failure's message: one config, or a part of a namespace delete. */
export type WriteTarget = ConfigWrite | { op: "deleteNamespace"; namespace: string };

const OP_NOUNS: Record<ConfigOp, string> = { set: "write", rollback: "rollback", remove: "delete" };

/** How to learn a write's outcome, per operation; paths are the REST API's, RPC names in parentheses. */
function howToCheck({ op, namespace, configId }: ConfigWrite): string {
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

/** The write of a config as its failure names it (see `@gov/redis` redisWriteCaller). */
export function failedConfigWrite(target: WriteTarget): FailedWrite {
  if (target.op === "deleteNamespace") {
    return {
      what: `the deletion of the configs of namespace "${target.namespace}"`,
      howToCheck: `list its configs (GET /v1/namespaces/${encodeURIComponent(target.namespace)}/configs, or ListConfigs): [] means they are gone; deleting again is safe`,
    };
  }
  return { what: `the ${OP_NOUNS[target.op]} of config "${target.configId}" in namespace "${target.namespace}"`, howToCheck: howToCheck(target) };
}
