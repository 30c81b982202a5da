import diagnostics_channel from "node:diagnostics_channel";

/**
 * Diagnostics channels the library publishes on. A monitor subscribes to turn them into metrics; with no
 * subscriber, publishing costs a boolean check (we test `hasSubscribers` before building the message).
 */
export const channels = {
  /** Lease events: `{namespace, instanceId, machineId, event: "distributed"|"renewed"|"failed"|"lost"|"reverted"|"revert-failed", error?, at}` */
  guard: diagnostics_channel.channel("gov:idgen:guard"),
  /** Segment prefetch: `{name, event: "appended"|"failed"|"hunger"|"shrink", offset?, maxId?, segments?, distance?, error?}` */
  prefetch: diagnostics_channel.channel("gov:idgen:prefetch"),
  /** Clock backwards: `{name, backwardsMs, lastTimestamp, action: "spin"|"sleep"|"refused"|"broken"}` */
  clockBackwards: diagnostics_channel.channel("gov:idgen:clock-backwards"),
} as const;

export const CHANNEL_NAMES = ["gov:idgen:guard", "gov:idgen:prefetch", "gov:idgen:clock-backwards"] as const;

export function publish(ch: diagnostics_channel.Channel, message: () => object): void {
  if (ch.hasSubscribers) ch.publish(message());
}
