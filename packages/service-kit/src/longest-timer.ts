/**
 * The longest delay Node's timers take: 2^31 − 1 ms, about 24.8 days. A longer one does not wait longer — Node sets it
 * to 1 ms (with a TimeoutOverflowWarning) — yet gRPC deadlines go up to 99999999H and Connect's up to 10 digits of
 * milliseconds (~115 days). A deadline beyond this is as good as none for a server, so it is treated as this long
 * instead of firing at once.
 */
export { LONGEST_TIMER_MS } from "@gov/settings";
