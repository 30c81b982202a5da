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

/** Most keys and arguments one script call takes (see callScript). */
export const MAX_SCRIPT_ARGUMENTS = 10_000;

/**
 * Calls `script` on `target`: the client itself (→ its reply), or a pipeline of it (→ the pipeline; the reply comes
 * with `exec`). Register the script on the client ({@link prepareScripts}) before creating the pipeline: a pipeline
 * knows the scripts its client had when it was made.
 */
export function callScript(client: RedisClient, script: LuaScript, keys: string[], args: (string | number)[], target: object = client): unknown {
  // ioredis spreads a command's arguments more than once on its way to the socket; tens of thousands overflow the stack
  // inside its auto-pipeline, whose replies then go astray until the process dies. Callers split such work in parts.
  if (keys.length + args.length > MAX_SCRIPT_ARGUMENTS) {
    throw new Error(`script ${script.name} was given ${keys.length + args.length} keys and arguments, over the ${MAX_SCRIPT_ARGUMENTS} one call may carry: split the work`);
  }
  const variable = script.numberOfKeys < 0;
  if (!variable && keys.length !== script.numberOfKeys) throw new Error(`script ${script.name} takes ${script.numberOfKeys} keys, got ${keys.length}`);
  const run = define(client, script, "late");
  return variable ? run.call(target, keys.length, ...keys, ...args) : run.call(target, ...keys, ...args);
}

/**
 * The script's command on `client`, registered now if it is not yet. Registering while an auto-pipeline is being
 * filled is unsafe: the open pipeline was made with the client's commands of that moment, so a call of the new one
 * joins it as a callback without a command, ioredis throws "pipeline[…] is not a function", and the pipeline's replies
 * go to the wrong callers until one throws "results[i] is not iterable" where no one can catch it: the process dies
 * (ioredis #1931; its fix, #2180, is in no release yet: 6.0.0 is the newest). Ahead of load ({@link prepareScripts})
 * nothing is open yet. A `late` registration (a first run that was not prepared, such as the ID generator's lease
 * renewal a minute after start) may fall in any pipeline, so that command is kept out of auto-pipelines on this client:
 * each call goes out on its own, which such rare calls can afford.
 */
function define(client: RedisClient, script: LuaScript, when: "ahead" | "late"): ScriptCommand {
  const commands = client as unknown as Record<string, ScriptCommand | undefined>;
  if (typeof commands[script.command] !== "function") {
    if (when === "late" && client.options.enableAutoPipelining) {
      // A new array: the default one is shared by every client ioredis makes.
      client.options.autoPipeliningIgnoredCommands = [...(client.options.autoPipeliningIgnoredCommands ?? []), script.command];
    }
    // Without numberOfKeys, ioredis takes the key count as the first argument (and still routes by the keys).
    client.defineCommand(script.command, script.numberOfKeys < 0 ? { lua: script.lua } : { numberOfKeys: script.numberOfKeys, lua: script.lua });
  }
  return commands[script.command] as ScriptCommand;
}

/**
 * Registers `scripts` on `client` ahead of their first run, so that they join the client's auto-pipelines like any
 * other command. Call it before the client carries other callers' commands (a store does, when it is created): see
 * `define` for what a registration amid auto-pipelined traffic would do. A script run without it still works, outside
 * auto-pipelines.
 */
export function prepareScripts(client: RedisClient, ...scripts: LuaScript[]): void {
  for (const script of scripts) define(client, script, "ahead");
}
