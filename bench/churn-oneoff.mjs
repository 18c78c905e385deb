// Churn for bench/memory-return.sh (issue 30, part 5): ROUNDS rounds of N
// WebSocket subscribers, each on a channel of its own used once
// (`once.R.I`): connect, subscribe, publish one message to it, receive it,
// close. Usage: node bench/churn-oneoff.mjs PORT [N] [ROUNDS]
// (after npm ci in sdk/typescript). Bounded: 2,000 × 3 connections, at most
// 200 open at once, every step under a 20 s timeout.
import WebSocket from "../sdk/typescript/node_modules/ws/index.js";
const [port, n = "2000", rounds = "3"] = process.argv.slice(2);
const AT_ONCE = 200;

function one(channel) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, "herald.json");
    const timer = setTimeout(() => { ws.terminate(); reject(new Error(`timeout on ${channel}`)); }, 20000);
    ws.on("open", () => {
      ws.send('{"id":1,"connect":{}}');
      ws.send(JSON.stringify({ id: 2, subscribe: { channel } }));
    });
    ws.on("message", (data) => {
      const m = JSON.parse(data.toString());
      if (m.id === 2 && m.subscribe) ws.send(JSON.stringify({ id: 3, publish: { channel, data: { x: "y".repeat(200) } } }));
      if (m.pub) { clearTimeout(timer); ws.close(); resolve(); }
      if (m.error) { clearTimeout(timer); ws.terminate(); reject(new Error(JSON.stringify(m))); }
    });
    ws.on("error", (e) => { clearTimeout(timer); reject(e); });
  });
}

for (let r = 0; r < Number(rounds); r++) {
  let next = 0;
  const worker = async () => { while (next < Number(n)) await one(`once.${r}.${next++}`); };
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  console.log(`round ${r + 1}: ${n} one-off channels`);
}
