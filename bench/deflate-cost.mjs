// Bytes on the wire and server CPU per delivered event, with and without
// permessage-deflate (issue 28, part 2), for bench/deflate.sh.
//
//   node bench/deflate-cost.mjs PORT SERVER_PID MODE N BATCH MESSAGES
//
// N WebSocket subscribers (Node's `ws`, from sdk/typescript/node_modules)
// on one channel; one publisher sends MESSAGES publications, each a JSON
// array of BATCH rows shaped like seed 002's streaming-query rows (about
// 170 bytes each: numbers, short strings, ISO timestamps), in windows of
// 20 that every subscriber must receive before the next window goes out.
// MODE: `plain` (no extension offered), `deflate` (offered: the server
// compresses each push once for every subscriber) or `deflate-own`
// (offered with server_max_window_bits=14: the server cannot share its
// full-window bytes with these, so its writer compresses each push again
// for every connection; docs/protocol.md §1).
// Reads herald_sent_bytes_total from /metrics and the server's CPU time from
// /proc/PID/stat before and after, and prints one JSON line. Bounded: every
// window must complete within 30 s plus 20 ms per subscriber.
import WebSocket from "../sdk/typescript/node_modules/ws/index.js";
import { readFileSync } from "node:fs";

const [port, pid, mode, nArg, batchArg, messagesArg] = process.argv.slice(2);
const N = Number(nArg);
const BATCH = Number(batchArg);
const MESSAGES = Number(messagesArg);
const WINDOW = 20;
const CHANNEL = "stream.cars";
const TICKS = 100; // USER_HZ

function row(i) {
  const t = new Date(Date.UTC(2022, 6, 13, 21, 4, 8, i % 1000)).toISOString();
  const r = (a, b) => a + Math.random() * (b - a);
  return [1, r(-180, 180), r(-90, 90), Math.floor(r(0, 100)), r(0, 100).toFixed(2), r(500, 1500), 0,
    `c00${String(i % 1000).padStart(3, "0")}`, t, t, "1970-01-01T00:00:00Z"];
}

function cpuSeconds() {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

async function bytesOut() {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("herald_sent_bytes_total"));
  return Number(line.split(" ").pop());
}

function options() {
  if (mode === "plain") return { perMessageDeflate: false };
  if (mode === "deflate") return { perMessageDeflate: { threshold: 1 << 30 } };
  if (mode === "deflate-own") return { perMessageDeflate: { threshold: 1 << 30, serverMaxWindowBits: 14 } };
  throw new Error(`unknown mode ${mode}`);
}

function open(opts) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, "herald.json", opts);
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

function request(ws, msg) {
  return new Promise((resolve, reject) => {
    const onMessage = (data) => {
      const m = JSON.parse(data.toString());
      if (m.id !== msg.id) return;
      ws.off("message", onMessage);
      if (m.error) reject(new Error(JSON.stringify(m.error)));
      else resolve(m);
    };
    ws.on("message", onMessage);
    ws.send(JSON.stringify(msg));
  });
}

let received = 0;
let events = 0;
let negotiated = 0;
const subs = [];
for (let i = 0; i < N; i += 100) {
  const batch = await Promise.all(Array.from({ length: Math.min(100, N - i) }, () => open(options())));
  subs.push(...batch);
}
for (const ws of subs) {
  if (ws.extensions && Object.keys(ws.extensions).length) negotiated++;
  await request(ws, { id: 1, connect: {} });
  await request(ws, { id: 2, subscribe: { channel: CHANNEL } });
  ws.on("message", (data) => {
    const m = JSON.parse(data.toString());
    if (m.pub) {
      received++;
      events += m.pub.data.length;
    }
  });
}
const pub = await open({ perMessageDeflate: false });
await request(pub, { id: 1, connect: {} });

const payloads = Array.from({ length: 50 }, (_, k) => Array.from({ length: BATCH }, (_, j) => row(k * BATCH + j)));
const wireBytes = payloads.reduce((s, p) => s + JSON.stringify(p).length, 0) / payloads.length;
const cpu0 = cpuSeconds();
const bytes0 = await bytesOut();
const t0 = Date.now();
let id = 10;
for (let sent = 0; sent < MESSAGES; ) {
  const upto = Math.min(MESSAGES, sent + WINDOW);
  for (; sent < upto; sent++) pub.send(JSON.stringify({ id: id++, publish: { channel: CHANNEL, data: payloads[sent % payloads.length] } }));
  const deadline = Date.now() + 30_000 + N * 20;
  while (received < upto * N) {
    if (Date.now() > deadline) throw new Error(`window stuck: ${received}/${upto * N}`);
    await new Promise((r) => setImmediate(r));
  }
}
const seconds = (Date.now() - t0) / 1000;
const bytes = (await bytesOut()) - bytes0;
const cpu = cpuSeconds() - cpu0;
for (const ws of subs) ws.terminate();
pub.terminate();
console.log(JSON.stringify({
  mode, n: N, batch: BATCH, messages: MESSAGES, negotiated,
  push_json_bytes: Math.round(wireBytes),
  deliveries: received, events,
  wire_bytes_per_delivery: +(bytes / received).toFixed(1),
  wire_bytes_per_event: +(bytes / events).toFixed(1),
  server_cpu_us_per_delivery: +((cpu * 1e6) / received).toFixed(2),
  server_cpu_us_per_event: +((cpu * 1e6) / events).toFixed(3),
  seconds: +seconds.toFixed(2),
}));
process.exit(0);
