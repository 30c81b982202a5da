import { createHash } from "node:crypto";
import type { Cluster, Redis } from "ioredis";

/** A standalone or cluster ioredis client, injected by the caller. */
export type RedisClient = Redis | Cluster;

/** A Lua script defined once; run with {@link runScript}. */
export interface LuaScript {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
  readonly numberOfKeys: number;
}

export function defineScript(name: string, numberOfKeys: number, lua: string): LuaScript {
  return { name, lua, numberOfKeys, sha: createHash("sha1").update(lua).digest("hex") };
}

/**
 * EVALSHA, falling back to EVAL on NOSCRIPT (a restarted or new cluster node has an empty script cache).
 * We do not `defineCommand` on the caller's client: it may be shared, and we should not add methods to it.
 * Every key is passed in KEYS so Cluster routes the call and strict proxies can check it.
 */
export async function runScript(client: RedisClient, script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
  if (keys.length !== script.numberOfKeys) throw new Error(`script ${script.name} takes ${script.numberOfKeys} keys, got ${keys.length}`);
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
    return client.eval(script.lua, keys.length, ...keys, ...args);
  }
}
