// Bytes and time for a whole-lobby subscriber of a large lobby (issue 26,
// decision 0015): node bench/lobby-measure.mjs PORT json|binary (after npm ci in sdk/typescript)
import WebSocket from "../sdk/typescript/node_modules/ws/index.js";
const [port, enc] = process.argv.slice(2);
const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, enc === "json" ? "herald.json" : "herald.binary");
ws.binaryType = "nodebuffer";
let bytes = 0, pages = 0, t0 = 0;
const varint = (n) => { const out = []; while (n >= 0x80) { out.push((n & 0x7f) | 0x80); n >>>= 7; } out.push(n); return out; };
ws.on("open", () => {
  if (enc === "json") {
    ws.send('{"id":1,"connect":{}}');
    t0 = performance.now();
    ws.send('{"id":2,"lobby":{"path":""}}');
  } else {
    ws.send(Buffer.from([0x01, 1, 0]));
    t0 = performance.now();
    ws.send(Buffer.from([0x09, 2, ...varint(0)]));
  }
});
ws.on("message", (data, isBinary) => {
  const b = Buffer.isBuffer(data) ? data : Buffer.from(data);
  if (enc === "json") {
    const s = b.toString();
    if (s.startsWith('{"id":1')) return;
    bytes += b.length;
    if (s.startsWith('{"lobby_page"')) pages++;
    if (s.startsWith('{"id":2,"lobby"')) done();
  } else {
    if (b[0] === 0x81) return;
    bytes += b.length;
    if (b[0] === 0xa9) pages++;
    if (b[0] === 0x89) done();
  }
});
function done() {
  console.log(`${enc}: ${(bytes / 1024 / 1024).toFixed(2)} MiB in ${pages} pages + the reply, ${(performance.now() - t0).toFixed(0)} ms`);
  ws.close();
  process.exit(0);
}
setTimeout(() => { console.log("timeout"); process.exit(1); }, 60000);
