import { createHash } from "node:crypto";
import { Command } from "ioredis";
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
 * Runs `script` with every key in KEYS (Cluster routes by them; strict proxies check them). The whole script (EVAL) goes
 * the first time on each connection and EVALSHA after that, resent whole on NOSCRIPT. So a write that times out is
 * still complete on the server (never an EVALSHA that later fails with NOSCRIPT, unseen), and a restarted or new
 * Cluster node needs no SCRIPT LOAD. A call on the client itself is sent as one command of ours ({@link sendScript});
 * for pipelines the script is registered once per client with ioredis' `defineCommand`, under a name no one else
 * uses, which does the same.
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
 * with `exec`), made before the script was first run or after.
 */
export function callScript(client: RedisClient, script: LuaScript, keys: string[], args: (string | number)[], target: object = client): unknown {
  checkScriptCall(script, keys, args);
  const run = define(client, script);
  if (target === client && sendsScriptsItself(client)) return sendScript(client, script, keys, args);
  return script.numberOfKeys < 0 ? run.call(target, keys.length, ...keys, ...args) : run.call(target, ...keys, ...args);
}

/**
 * Whether a call on `client` itself may skip ioredis' script command (see {@link sendScript}): not when ioredis would
 * add to the command (a key prefix, friendly error stacks) or gather it into an auto-pipeline.
 */
const sendsScriptsItself = (client: RedisClient): boolean =>
  !client.options.keyPrefix && !client.options.showFriendlyErrorStack && !client.options.enableAutoPipelining;

const UTF8_REPLIES = { replyEncoding: "utf8" } as const;
const NO_ARGUMENTS: never[] = [];

/** The connections each script has been sent to whole (EVAL): the next call on one of them sends its SHA. */
const sentWhole = new WeakMap<LuaScript, WeakSet<object>>();
const connectionsHaving = (script: LuaScript): WeakSet<object> => {
  let sockets = sentWhole.get(script);
  if (sockets === undefined) sentWhole.set(script, (sockets = new WeakSet()));
  return sockets;
};

/**
 * One call of a script: the whole script (EVAL) the first time it goes out on a connection, its SHA (EVALSHA) after
 * that — decided as it is written, so a command resent on another connection (a reconnect, a Cluster redirection)
 * decides again. Arguments: [sha, key count, ...keys, ...args].
 */
class ScriptCall extends Command {
  /** The connection it was last written to, whose cache a NOSCRIPT reply is about. */
  socket: object | undefined;
  constructor(
    readonly script: LuaScript,
    args: (string | number)[],
  ) {
    // Made without its arguments, which the constructor would flatten (`args.flat()`, ~60 ns an argument: ~0.9 µs of a
    // config write's 14), and given them after: they are flat by construction. Replies as strings, as from ioredis'
    // own script command.
    super("evalsha", NO_ARGUMENTS, UTF8_REPLIES);
    this.args = args;
    this.stringifyArguments();
  }
  override toWritable(socket: object): string | Buffer {
    this.socket = socket;
    const sockets = connectionsHaving(this.script);
    if (!sockets.has(socket)) {
      sockets.add(socket);
      this.name = "eval";
      this.args[0] = this.script.lua;
    } else if (this.name === "eval") {
      this.name = "evalsha";
      this.args[0] = this.script.sha;
    }
    return super.toWritable(socket);
  }
}

/**
 * [sha, key count, ...keys, ...args] in an array of exactly that size. It is kept until the reply; one built by spreading
 * carries spare capacity, and cost a config `PUT` 2–3 µs more in garbage collection (measured twice: with this command,
 * and before it with ioredis' own spread-built array).
 */
function scriptArguments(script: LuaScript, keys: string[], args: (string | number)[]): (string | number)[] {
  const all = new Array<string | number>(2 + keys.length + args.length);
  all[0] = script.sha;
  all[1] = keys.length;
  for (let i = 0; i < keys.length; i++) all[2 + i] = keys[i];
  for (let i = 0; i < args.length; i++) all[2 + keys.length + i] = args[i];
  return all;
}

/**
 * Runs `script` on `client` as ioredis' script command does (EVAL first on each connection, EVALSHA after, the whole
 * script again after NOSCRIPT), without what that command adds to every call: the arguments gathered and copied three
 * times, an options object, two more promises and a closure (ioredis 6.0.0). A config `PUT` allocated ~23 KB, ~4 KB of
 * it there.
 */
function sendScript(client: RedisClient, script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
  const call = new ScriptCall(script, scriptArguments(script, keys, args));
  return (client.sendCommand(call) as Promise<unknown>).catch((err: unknown) => {
    // the server's script cache was emptied (a restart, SCRIPT FLUSH): sent whole again, as a new command
    if (!(err instanceof Error) || !err.message.includes("NOSCRIPT")) throw err;
    if (call.socket !== undefined) connectionsHaving(script).delete(call.socket);
    return client.sendCommand(new ScriptCall(script, scriptArguments(script, keys, args)));
  });
}

/** Throws unless `script` may be called with these keys and arguments: as many keys as it declares, not too many in all. */
export function checkScriptCall(script: LuaScript, keys: string[], args: (string | number)[]): void {
  // ioredis spreads a command's arguments more than once on its way to the socket; tens of thousands overflow the stack
  // inside its auto-pipeline, whose replies then go astray until the process dies. Callers split such work in parts.
  if (keys.length + args.length > MAX_SCRIPT_ARGUMENTS) {
    throw new Error(`script ${script.name} was given ${keys.length + args.length} keys and arguments, over the ${MAX_SCRIPT_ARGUMENTS} one call may carry: split the work`);
  }
  if (script.numberOfKeys >= 0 && keys.length !== script.numberOfKeys) throw new Error(`script ${script.name} takes ${script.numberOfKeys} keys, got ${keys.length}`);
}

/**
 * The script's command on `client`, registered now if it is not yet. A first run may fall while an auto-pipeline is
 * being filled: that pipeline was made before the command existed, and when ioredis copied the commands onto each
 * pipeline, the call joined it as a callback without a command; ioredis threw "pipeline[…] is not a function" and the
 * pipeline's replies went to the wrong callers until one threw "results[i] is not iterable" where no one could catch
 * it: the process died (ioredis #1931; its fix, #2180, is in no release yet: 6.0.0 is the newest). Shared through the
 * pipelines' prototype ({@link shareWithPipelines}), the command is on every pipeline from the moment it is defined.
 */
function define(client: RedisClient, script: LuaScript): ScriptCommand {
  const commands = client as unknown as Record<string, ScriptCommand | undefined>;
  if (typeof commands[script.command] !== "function") {
    // Without numberOfKeys, ioredis takes the key count as the first argument (and still routes by the keys).
    client.defineCommand(script.command, script.numberOfKeys < 0 ? { lua: script.lua } : { numberOfKeys: script.numberOfKeys, lua: script.lua });
    shareWithPipelines(client, script.command);
  }
  return commands[script.command] as ScriptCommand;
}


/**
 * ioredis copies every defined script onto each pipeline it makes (two own properties per script, in its constructor),
 * and it makes one per auto-pipeline flush and per `multi()`: with the ~30 scripts of an all-in-one process that was
 * 13 µs per pipeline (2 µs without), ~4 % of a registration's CPU. The command's function runs the script on `this`
 * and holds nothing but the script, so it is put once on the pipelines' prototype, where every pipeline, also one made
 * before, finds it; and taken out of the set that the constructor copies (ioredis 6.0.0 reads that set nowhere else).
 * The script holds its client's key prefix, though: a prefixed client's command is not shared, and is kept out of that
 * client's auto-pipelines instead (a pipeline already open would not have it).
 */
function shareWithPipelines(client: RedisClient, command: string): void {
  if (client.options.keyPrefix) {
    // A new array: the default one is shared by every client ioredis makes.
    client.options.autoPipeliningIgnoredCommands = [...(client.options.autoPipeliningIgnoredCommands ?? []), command];
    return;
  }
  const internals = client as unknown as { scriptsSet: Record<string, unknown> } & Record<string, unknown>;
  const pipelines = Object.getPrototypeOf(client.pipeline()) as Record<string, unknown>;
  pipelines[command] ??= internals[command];
  delete internals.scriptsSet[command];
}

/** Registers `scripts` on `client` ahead of their first run (a store does, when it is created). */
export function prepareScripts(client: RedisClient, ...scripts: LuaScript[]): void {
  for (const script of scripts) define(client, script);
}
