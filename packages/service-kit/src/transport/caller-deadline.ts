import { Code, ConnectError } from "@connectrpc/connect";

/**
 * The caller's deadline as a wall-clock time (epoch milliseconds), sent by our remote transport beside Connect's
 * relative `connect-timeout-ms`. A relative timeout is counted from when the service reads the call: a service process
 * that was paused (SIGSTOP, a frozen VM, a long GC) past the caller's deadline reads the call when it resumes and
 * counts the whole time again, so a write the gateway has already answered 504 ("may or may not have been applied")
 * would still be applied, seconds later, after a newer one. With this header the service refuses such a call unread.
 */
export const CALLER_DEADLINE_HEADER = "x-gov-deadline";

/**
 * How far past the caller's deadline a call is still run: the clocks of the caller's and the service's hosts may
 * differ by up to this much (a call is refused only once it is surely late by the caller's clock too).
 */
export const CLOCK_SKEW_ALLOWANCE_MS = 1000;

/** The refusal of a call read after its caller's deadline (see {@link CALLER_DEADLINE_HEADER}); undefined when it is in time. */
export function lateCall(header: string | string[] | undefined, now: number): ConnectError | undefined {
  if (typeof header !== "string") return undefined;
  const deadline = Number(header);
  if (!Number.isSafeInteger(deadline) || now <= deadline + CLOCK_SKEW_ALLOWANCE_MS) return undefined;
  return new ConnectError(
    `this call reached the service ${now - deadline} ms after its caller's deadline (${new Date(deadline).toISOString()}): the service was paused, or its host's clock is more than ${CLOCK_SKEW_ALLOWANCE_MS} ms ahead of the caller's; nothing was done (the caller has answered that the outcome is unknown)`,
    Code.DeadlineExceeded,
  );
}
