/**
 * Chat client vs the official `openai` client (6.49.0), same loopback server, same run:
 *   (a) stream throughput: events/s reading one 10,000-chunk SSE response to the end, median of several rounds;
 *   (b) non-stream overhead: mean and p99 latency over sequential calls returning a small JSON body.
 * Targets (issue 4): events/s ≥ 1.5× openai; non-stream mean ≤ 1.0× openai.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { Provider } from "../packages/chat-client/src/index.js";

const STREAM_CHUNKS = 10_000;
const STREAM_ROUNDS = 7;
const CALLS = 2_000;
const WARMUP_CALLS = 200;

function chunkJson(i: number): string {
  return JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion.chunk",
    created: 1_763_000_000,
    model: "bench-model",
    system_fingerprint: "fp_bench",
    choices: [{ index: 0, delta: { content: `token ${i} ` }, logprobs: null, finish_reason: null }],
    usage: null,
    obfuscation: "x1y2z3",
  });
}

const streamBody = Buffer.from(
  Array.from({ length: STREAM_CHUNKS }, (_, i) => `data: ${chunkJson(i)}\n\n`).join("") + "data: [DONE]\n\n",
);
const jsonBody = Buffer.from(
  JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion",
    created: 1_763_000_000,
    model: "bench-model",
    choices: [{ index: 0, message: { role: "assistant", content: "Hello there, how can I help?" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 },
  }),
);

function startServer(): Promise<Server> {
  const server = createServer((req, res) => {
    const body: Buffer[] = [];
    req.on("data", (c: Buffer) => body.push(c));
    req.on("end", () => {
      const stream = Buffer.concat(body).includes('"stream":true');
      if (stream) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        res.end(streamBody);
      } else {
        res.writeHead(200, { "content-type": "application/json", "content-length": jsonBody.length });
        res.end(jsonBody);
      }
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)];

const server = await startServer();
const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
const ours = new Provider({ baseURL, apiKey: "sk-bench" }).chat;
const theirs = new OpenAI({ baseURL, apiKey: "sk-bench" });
const messages = [{ role: "user" as const, content: "hi" }];

async function streamOurs(): Promise<number> {
  let n = 0;
  for await (const event of await ours.completions({ model: "m", messages, stream: true })) if (event.data.choices[0]) n++;
  return n;
}
async function streamTheirs(): Promise<number> {
  let n = 0;
  for await (const chunk of await theirs.chat.completions.create({ model: "m", messages, stream: true })) if (chunk.choices[0]) n++;
  return n;
}

async function eventsPerSecond(run: () => Promise<number>): Promise<number> {
  const start = performance.now();
  const n = await run();
  if (n !== STREAM_CHUNKS) throw new Error(`expected ${STREAM_CHUNKS} events, got ${n}`);
  return n / ((performance.now() - start) / 1000);
}

// (a) stream throughput; rounds alternate so drift in machine load hits both sides alike.
await eventsPerSecond(streamOurs);
await eventsPerSecond(streamTheirs);
const oursEps: number[] = [];
const theirsEps: number[] = [];
for (let round = 0; round < STREAM_ROUNDS; round++) {
  oursEps.push(await eventsPerSecond(streamOurs));
  theirsEps.push(await eventsPerSecond(streamTheirs));
}

// (b) non-stream latency. Calls alternate ours / openai / bare fetch (order rotating each round), so drift in
// machine load hits all three alike. The bare `fetch` + `json()` of the same request is the floor both clients
// build on; "overhead" is a client's mean minus that floor.
const body = JSON.stringify({ model: "m", messages });
const callOurs = () => ours.completions({ model: "m", messages });
const callTheirs = () => theirs.chat.completions.create({ model: "m", messages });
const callBare = async () =>
  (await fetch(`${baseURL}/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer sk-bench" }, body })).json();
const calls = [callOurs, callTheirs, callBare];
const lat: number[][] = [[], [], []];
for (let i = 0; i < WARMUP_CALLS + CALLS; i++) {
  for (let k = 0; k < 3; k++) {
    const which = (i + k) % 3;
    const start = performance.now();
    await calls[which]();
    if (i >= WARMUP_CALLS) lat[which].push(performance.now() - start);
  }
}
const [oursLat, theirsLat, bareLat] = lat;

server.close();
server.closeAllConnections();

const fmt = (x: number, d = 0) => x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
const eps = { ours: median(oursEps), theirs: median(theirsEps) };
const overhead = { ours: mean(oursLat) - mean(bareLat), theirs: mean(theirsLat) - mean(bareLat) };
console.log(`Node ${process.version}; openai 6.49.0; ${STREAM_CHUNKS} chunks × ${STREAM_ROUNDS} rounds; ${CALLS} non-stream calls each (interleaved)\n`);
console.log("| measure | @gov/chat-client | openai | bare fetch | ratio (ours/openai) | target |");
console.log("|---|---:|---:|---:|---:|---|");
console.log(`| stream events/s (median of ${STREAM_ROUNDS}) | ${fmt(eps.ours)} | ${fmt(eps.theirs)} | | ${fmt(eps.ours / eps.theirs, 2)}× | ≥ 1.5× |`);
console.log(`| non-stream latency, mean (ms) | ${fmt(mean(oursLat), 3)} | ${fmt(mean(theirsLat), 3)} | ${fmt(mean(bareLat), 3)} | ${fmt(mean(oursLat) / mean(theirsLat), 2)}× | ≤ 1.0× |`);
console.log(`| non-stream latency, median (ms) | ${fmt(median(oursLat), 3)} | ${fmt(median(theirsLat), 3)} | ${fmt(median(bareLat), 3)} | ${fmt(median(oursLat) / median(theirsLat), 2)}× | (info) |`);
console.log(`| non-stream latency, p99 (ms) | ${fmt(p99(oursLat), 3)} | ${fmt(p99(theirsLat), 3)} | ${fmt(p99(bareLat), 3)} | ${fmt(p99(oursLat) / p99(theirsLat), 2)}× | (info) |`);
console.log(`| non-stream overhead over bare fetch, mean (ms) | ${fmt(overhead.ours, 3)} | ${fmt(overhead.theirs, 3)} | 0 | ${fmt(overhead.ours / overhead.theirs, 2)}× | (info) |`);
const ok = eps.ours / eps.theirs >= 1.5 && mean(oursLat) / mean(theirsLat) <= 1.0;
console.log(`\n${ok ? "targets met" : "TARGETS MISSED"}`);
