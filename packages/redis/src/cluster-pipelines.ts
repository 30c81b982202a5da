import { Cluster } from "ioredis";

/**
 * A guard for a defect of ioredis 6.0.0's Cluster pipelines (MULTI reads, durable writes) that hands commands each
 * other's replies after a master failover — found when a registry renewal got "OK" as its answer (a NaN deadline) in the
 * distributed test, and reproduced alone (8 of 18 master kills).
 *
 * A pipeline goes to one node, chosen when its first command is routed (`node.redis`). When the slot's owner is not in
 * the connection pool (the dead master's connection has ended, the slot table not yet refreshed), each command is routed
 * to a random master instead, and a command that lands on one whose connection is not ready is refused ("Connection is
 * closed.") *before* the pipeline's node is set. The next command is then routed anew, lands on a ready connection,
 * sets the node, and it and the rest are queued there as awaiting replies — but the pipeline writes its commands only
 * once every one of them is in its buffer, which the refused one never is. Nothing is sent; the queue keeps them; and
 * every later reply on that connection goes to the command queued before its own, until the connection closes:
 * reads return other keys' values, scripts get "OK" (cluster/index.js `tryConnection`, Pipeline.js `execPipeline`).
 *
 * Once a command of a pipeline is refused before its node is chosen, the guard refuses the rest of that pipeline the
 * same way. None of it is sent, so the whole pipeline fails (or is retried by ioredis, as it retries a pipeline whose
 * commands all failed alike); nothing is left in a queue. Installed once per process, on the class, so that every
 * Cluster client has it. It relies on the internals named above: ioredis is pinned, and
 * test/cluster-pipelines.test.ts fails if they change under it.
 */
export function guardClusterPipelines(): void {
  const proto = Cluster.prototype as unknown as { sendCommand: SendCommand; [GUARDED]?: true };
  if (proto[GUARDED]) return;
  proto[GUARDED] = true;
  const send = proto.sendCommand;
  const refusals = new WeakMap<PipelineNode, Error>();
  proto.sendCommand = function (this: Cluster, command, stream, node) {
    // Not a pipeline's command, or its node is chosen already: nothing to guard.
    if (node === undefined || stream?.isPipeline !== true || node.redis !== undefined) return send.call(this, command, stream, node);
    const refused = refusals.get(node);
    if (refused !== undefined) {
      command.reject(new (refused.constructor as ErrorConstructor)(refused.message));
      return command.promise;
    }
    const reject = command.reject;
    let refusal: Error | undefined;
    command.reject = (err: Error) => {
      refusal = err;
      reject.call(command, err);
    };
    try {
      return send.call(this, command, stream, node);
    } finally {
      command.reject = reject;
      if (refusal !== undefined && node.redis === undefined) refusals.set(node, refusal);
    }
  };
}

const GUARDED = Symbol.for("gov.redis.clusterPipelinesGuarded");

interface PipelineNode {
  slot: number;
  redis?: unknown;
}

interface RoutedCommand {
  reject(err: Error): void;
  promise: Promise<unknown>;
}

type SendCommand = (command: RoutedCommand, stream?: { isPipeline?: boolean }, node?: PipelineNode) => unknown;
