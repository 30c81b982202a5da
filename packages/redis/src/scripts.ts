import { createHash } from "node:crypto";
import type { RedisClient } from "./connect.js";

/** A Lua script defined once (its SHA computed once); run with {@link runScript}. */
export interface LuaScript {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
  /** How many KEYS every call passes; -1: as many as the call gives (a script over a whole namespace). */
  readonly numberOfKeys: number;
  /** The ioredis command it is registered as: name and SHA, so that two scripts (or versions) never collide. */
  readonly command: string;
}

export function defineScript(name: string, numberOfKeys: number, lua: string): LuaScript {
  const sha = createHash("sha1").update(lua).digest("hex");
  return { name, lua, numberOfKeys, sha, command: `gov_${name.replace(/\W/g, "_")}_${sha.slice(0, 12)}` };
}

type ScriptCommand = (...keysAndArgs: (string | number)[]) => Promise<unknown>;

/**
 * Runs `script` with every key in KEYS (Cluster routes by them; strict proxies check them). It is registered once per
 * client with ioredis' `defineCommand`, under a name no one else uses: ioredis then sends the whole script (EVAL) the
 * first time on each connection and EVALSHA after that, and resends on NOSCRIPT. So a write that times out is still
 * complete on the server (never an EVALSHA that later fails with NOSCRIPT, unseen), and a restarted or new Cluster node
 * needs no SCRIPT LOAD.
 */
export function runScript(client: RedisClient, script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return callScript(client, script, keys, args) as Promise<unknown>;
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * Calls `script` on `target`: the client itself (→ its reply), or a pipeline of it (→ the pipeline; the reply comes
 * with `exec`). Register the script on the client ({@link prepareScripts}) before creating the pipeline: a pipeline
 * knows the scripts its client had when it was made.
 */
export function callScript(client: RedisClient, script: LuaScript, keys: string[], args: (string | number)[], target: object = client): unknown {
  const variable = script.numberOfKeys < 0;
  if (!variable && keys.length !== script.numberOfKeys) throw new Error(`script ${script.name} takes ${script.numberOfKeys} keys, got ${keys.length}`);
  const run = define(client, script);
  return variable ? run.call(target, keys.length, ...keys, ...args) : run.call(target, ...keys, ...args);
}

/** The script's command on `client`, registered on first use. */
function define(client: RedisClient, script: LuaScript): ScriptCommand {
  const commands = client as unknown as Record<string, ScriptCommand | undefined>;
  if (typeof commands[script.command] !== "function") {
    // Without numberOfKeys, ioredis takes the key count as the first argument (and still routes by the keys).
    client.defineCommand(script.command, script.numberOfKeys < 0 ? { lua: script.lua } : { numberOfKeys: script.numberOfKeys, lua: script.lua });
  }
  return commands[script.command] as ScriptCommand;
}

/**
 * Registers `scripts` on `client` now rather than at their first run. Defining a command while an auto-pipeline is
 * being filled in the same tick misaligns its replies (ioredis #1931: "results[i] is not iterable"), so a store
 * whose client others use concurrently registers its scripts when it is created.
 */
export function prepareScripts(client: RedisClient, ...scripts: LuaScript[]): void {
  for (const script of scripts) define(client, script);
}
