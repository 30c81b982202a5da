import type { Redis } from "ioredis";

/**
 * ioredis sends the commands a dropped connection left unanswered again once the connection is back
 * (`autoResendUnfulfilledCommands`; likewise its offline queue), also those whose callers have had their answer
 * meanwhile: a write that timed out — its caller told "outcome unknown" (504), and free to write a newer value through
 * another gateway — ran on Redis after that newer value, however long the connection took to come back, and overwrote
 * it. A command whose caller has its answer is never sent now; those still awaited are, as before. Returns `client`.
 */
export function resendOnlyAwaited(client: Redis): Redis {
  const send = client.sendCommand;
  client.sendCommand = function (this: Redis, ...args: Parameters<Redis["sendCommand"]>) {
    const [command] = args;
    if ((command as { isSettled?: boolean }).isSettled) return command.promise;
    return send.apply(this, args);
  } as Redis["sendCommand"];
  return client;
}
