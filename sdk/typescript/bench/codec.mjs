// Codec speed of the TypeScript SDK on one demo row (seed 002's shape):
// decode a publication push in each encoding, and the encoder's check that a
// payload is JSON. Run after `npm run build`: node bench/codec.mjs
// Prints nanoseconds per message; nothing is asserted (machines differ).
import { decodeBinaryServer, decodeJsonServer, encodeBinary, encodeJson, isJson } from "../dist/index.js";

const row = `{"seq":1,"time":"2026-11-23T08:49:59.559Z","car":"c00079","lon":116.531560,"lat":40.185710,"speed":65,"gas":27.80}`;
const json = `{"pub":{"channel":"demo.stream","offset":123,"data":${row}}}`;
const msg = decodeJsonServer(json);
const binary = encodeBinary(msg);
const payload = new TextEncoder().encode(row);

const cases = [
  ["decode JSON publication", () => decodeJsonServer(json)],
  ["decode binary publication", () => decodeBinaryServer(binary)],
  ["encode JSON publication", () => encodeJson(msg)],
  ["encode binary publication", () => encodeBinary(msg)],
  ["isJson(payload)", () => isJson(payload)],
];
for (const [name, f] of cases) {
  for (let i = 0; i < 50_000; i++) f();
  const best = [];
  for (let round = 0; round < 5; round++) {
    const n = 100_000;
    const t = performance.now();
    for (let i = 0; i < n; i++) f();
    best.push(((performance.now() - t) * 1e6) / n);
  }
  console.log(`${name.padEnd(28)} ${Math.min(...best).toFixed(0).padStart(6)} ns/msg (best of 5)`);
}
