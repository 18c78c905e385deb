// Idle memory per WebSocket connection with and without permessage-deflate
// negotiated (issue 28, part 2: no context takeover, so an idle connection
// should keep no compression state).
//
//   node bench/deflate-idle.mjs PORT SERVER_PID MODE N [SETTLE_S]
//
// MODE `plain` or `deflate`. Reads the server's RSS, opens N connections
// (Node's `ws` from sdk/typescript), each connecting and subscribing to one
// shared channel, publishes one 2 kB message there (so that every
// connection has been sent a compressed push), waits SETTLE_S seconds
// (default 12), reads the RSS again and prints KiB per connection.
import WebSocket from "../sdk/typescript/node_modules/ws/index.js";
import { readFileSync } from "node:fs";

const [port, pid, mode, nArg, settleArg = "12"] = process.argv.slice(2);
const N = Number(nArg);
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);

function one(i) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, "herald.json", {
      perMessageDeflate: mode === "deflate" ? { threshold: 1 << 30 } : false,
    });
    const timer = setTimeout(() => reject(new Error(`timeout on ${i}`)), 30_000);
    ws.on("open", () => {
      ws.send('{"id":1,"connect":{}}');
      ws.send(JSON.stringify({ id: 2, subscribe: { channel: "idle.all" } }));
    });
    ws.on("message", (data) => {
      const m = JSON.parse(data.toString());
      if (m.id === 2) resolve(ws);
      if (m.pub) {
        clearTimeout(timer);
        got++;
      }
    });
    ws.on("error", reject);
  });
}

let got = 0;

const before = rss();
const all = [];
for (let i = 0; i < N; i += 200) {
  all.push(...(await Promise.all(Array.from({ length: Math.min(200, N - i) }, (_, k) => one(i + k)))));
}
all[0].send(JSON.stringify({ id: 3, publish: { channel: "idle.all", data: { x: "y".repeat(2000) } } }));
for (let t = 0; got < N; t++) {
  if (t > 3000) throw new Error(`only ${got} of ${N} got the publication`);
  await new Promise((r) => setTimeout(r, 10));
}
const negotiated = all.filter((ws) => Object.keys(ws.extensions ?? {}).length > 0).length;
await new Promise((r) => setTimeout(r, Number(settleArg) * 1000));
const after = rss();
console.log(JSON.stringify({ mode, n: N, negotiated, rss_before_kib: before, rss_after_kib: after, kib_per_connection: +((after - before) / N).toFixed(3) }));
for (const ws of all) ws.terminate();
process.exit(0);
