/**
 * Every request through Node's HTTP server queues several `process.nextTick` callbacks (stream ends, writes, resumes),
 * and Node makes each one an object literal with two symbol keys (`internal/process/task_queues`). Which machine code
 * V8 settles on for that literal depends on the ticks a process queued first: when its startup queued them almost all
 * without arguments, the literal's feedback later turns megamorphic under load and every tick, for the life of the
 * process, is built through the V8 runtime (`Runtime_DefineKeyedOwnPropertyInLiteral`, with map transitions).
 *
 * Measured here with `perf` (Node 20, pinned, `wrk -c32`): 7.5 % of the gateway's samples under `/lb` load and 10 % of
 * a bare Fastify route's; the bare route answered 37–44k req/s in that state and 50–53k out of it. Settled, the
 * gateway's `/lb` went from 38–42 µs of CPU per request to 31, a config `GET` from ~36 to 29–30. A process holding a
 * connected ioredis client (its startup queues ticks with arguments) mostly escaped it — why the benchmarks' bare
 * routes, which hold one, read faster than the same route without, a riddle of earlier sessions.
 *
 * Queuing a few thousand ticks with arguments before the process's own startup settles V8 on the fast form; done later
 * (once the server listens) it no longer does. ~17 ms, once per process.
 */
export async function settleNextTickShape(): Promise<void> {
  const ignore = (_a: unknown, _b?: unknown) => {};
  for (let batch = 0; batch < SETTLING_TICKS / BATCH; batch++) {
    for (let i = 0; i < BATCH; i++) {
      process.nextTick(ignore, i, i);
      process.nextTick(ignore, i);
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Enough calls for V8 to optimize `nextTick` with these shapes in its feedback (200 were not; 2,000 were). */
const SETTLING_TICKS = 5000;
/**
 * Ticks queued at once, then run before the next batch. Left queued while startup went on (5,000 at once), they
 * outlived young-generation collections, and V8 then allocated every later tick object straight in the old generation
 * (allocation-site pretenuring): the gateway answered 30 % fewer requests, its time in the collector.
 */
const BATCH = 250;
