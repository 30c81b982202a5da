import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { idgenConfigFromSettings, startIdGen, stateFile, type IdGen } from "../src/index.js";
import { captureLogs, shiftableClock, waitUntil } from "./helpers.js";

const STATE = "idgen.machine.state-storage.local.state-location";
const dirs: string[] = [];
const running: IdGen[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((g) => g.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const stateDir = () => {
  const d = mkdtempSync(join(tmpdir(), "idgen-state-"));
  dirs.push(d);
  return join(d, "machine-state"); // not there yet: the first write makes it
};

/** A manual process: machine id 3, no segments; `settings` on top. */
async function start(clock: { now(): number }, settings: Record<string, string> = {}): Promise<IdGen> {
  const config = idgenConfigFromSettings({ "idgen.namespace": "orders", "idgen.machine.machine-id": "3", ...settings });
  const idgen = await startIdGen(config, { clock, logger: captureLogs().logger });
  running.push(idgen);
  return idgen;
}

/** `n` Snowflake ids, as fast as they come (thousands a millisecond, so every tick they cover is full of them). */
function ids(idgen: IdGen, n: number): bigint[] {
  const g = idgen.registry.get("snowflake") as { nextId(): bigint };
  return Array.from({ length: n }, () => g.nextId());
}

/** The millisecond an id was issued in (Snowflake layout: timestamp, machine, sequence). */
const tickOf = ({ config }: IdGen, id: bigint) => Number(id >> BigInt(config.machine.machineBit + config.snowflake.sequenceBit)) + config.snowflake.epoch;

/**
 * Two runs of one manual process, the second after a restart with its clock set back to where the first began (an NTP
 * correction, a VM restored from a snapshot): the ids both issue.
 */
async function restartWithClockSetBack(settings: Record<string, string>): Promise<{ first: bigint[]; second: bigint[]; firstRun: IdGen; secondRun: IdGen }> {
  const clock = shiftableClock();
  const firstRun = await start(clock, settings);
  const began = clock.now();
  const first = ids(firstRun, 20_000);
  await firstRun.close();
  running.splice(running.indexOf(firstRun), 1);
  clock.shift(began - clock.now()); // back to where the first run began
  const secondRun = await start(clock, settings);
  return { first, second: ids(secondRun, 20_000), firstRun, secondRun };
}

describe("manual machine id with a state file (idgen.machine.state-storage.local.state-location)", () => {
  it("without one, a restart with the clock set back issues the first run's ids again", async () => {
    const { first, second } = await restartWithClockSetBack({});
    const seen = new Set(first);
    expect(second.filter((id) => seen.has(id)).length).toBeGreaterThan(0);
  });

  it("with one, the restart waits until its clock is past the first run's last tick: no id twice", async () => {
    const dir = stateDir();
    const { first, second, firstRun, secondRun } = await restartWithClockSetBack({ [STATE]: dir });
    const seen = new Set(first);
    expect(second.filter((id) => seen.has(id))).toEqual([]);
    expect(tickOf(secondRun, second[0])).toBeGreaterThan(tickOf(firstRun, first[first.length - 1]));
    const saved = JSON.parse(readFileSync(stateFile(dir, "orders", 3), "utf8")) as { namespace: string; machineId: number; lastTimestamp: number };
    expect(saved).toEqual({ namespace: "orders", machineId: 3, lastTimestamp: expect.any(Number) });
    expect(saved.lastTimestamp).toBeGreaterThanOrEqual(tickOf(firstRun, first[first.length - 1]));
  });

  it("refuses to start when the recorded time is further ahead than the broken threshold, and says by how much", async () => {
    const dir = stateDir();
    const clock = shiftableClock();
    await (await start(clock, { [STATE]: dir })).close();
    running.length = 0;
    clock.shift(-5_000);
    await expect(start(clock, { [STATE]: dir })).rejects.toMatchObject({ code: "CLOCK_TOO_MANY_BACKWARDS", message: expect.stringMatching(/^Clock moved backwards by \d+ ms, more than the broken threshold of 500 ms/) });
    // the refusal does not lower what is recorded: a start with the clock right again still waits past it
    clock.shift(5_000);
    const again = await start(clock, { [STATE]: dir });
    expect(again.lease?.machineId).toBe(3);
  });

  it("records the time at every renewal, so a process killed without a shutdown leaves its last one", async () => {
    const dir = stateDir();
    const clock = shiftableClock();
    const idgen = await start(clock, { [STATE]: dir, "idgen.machine.guarder.initial-delay": "50ms", "idgen.machine.guarder.delay": "50ms" });
    const file = stateFile(dir, "orders", 3);
    const atStart = (JSON.parse(readFileSync(file, "utf8")) as { lastTimestamp: number }).lastTimestamp;
    ids(idgen, 10);
    await waitUntil("two renewals", () => (idgen.lease?.state().renewals.success ?? 0) >= 2);
    expect((JSON.parse(readFileSync(file, "utf8")) as { lastTimestamp: number }).lastTimestamp).toBeGreaterThan(atStart);
  });

  it("a state that cannot be written is a failed renewal: Guard Failed, the lease DOWN, and UP again once it can", async () => {
    const dir = stateDir();
    const clock = shiftableClock();
    const logs = captureLogs();
    const config = idgenConfigFromSettings({ "idgen.namespace": "orders", "idgen.machine.machine-id": "3", [STATE]: dir, "idgen.machine.guarder.initial-delay": "50ms", "idgen.machine.guarder.delay": "50ms", "idgen.machine.guarder.retry-delay": "50ms" });
    const idgen = await startIdGen(config, { clock, logger: logs.logger });
    running.push(idgen);
    rmSync(dir, { recursive: true });
    writeFileSync(dir, "a file where the folder was");
    await waitUntil("a failed renewal", () => idgen.lease?.state().status === "DOWN");
    expect(logs.find("error", "Guard Failed")[0]).toMatchObject({ error: expect.stringContaining(dir) });
    rmSync(dir);
    await waitUntil("a renewal again", () => idgen.lease?.state().status === "UP");
  });

  it("a state file without a last timestamp stops the start with a message naming it (it is not taken as empty)", async () => {
    const dir = stateDir();
    const clock = shiftableClock();
    await (await start(clock, { [STATE]: dir })).close();
    running.length = 0;
    const file = stateFile(dir, "orders", 3);
    writeFileSync(file, "{oops");
    await expect(start(clock, { [STATE]: dir })).rejects.toThrow(`the machine state file ${file} holds no last timestamp ("{oops"): delete it only if this host's clock has not been set back since it was written`);
  });

  it("is the manual distributor's setting: with redis it is refused, naming both settings", () => {
    expect(() => idgenConfigFromSettings({ "idgen.machine.distributor.type": "redis", [STATE]: "/tmp/x" })).toThrow(
      /idgen\.machine\.state-storage\.local\.state-location.*keeps the manual distributor's last timestamp, but idgen\.machine\.distributor\.type is redis, which keeps it in Redis: unset it, or set idgen\.machine\.distributor\.type=manual/,
    );
  });
});
