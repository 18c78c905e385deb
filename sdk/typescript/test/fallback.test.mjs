// Transport fallback: when WebSocket is blocked the client falls back to SSE,
// and when SSE is blocked too, to long-polling — and the connection works.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { Client, endpoints } from "../dist/index.js";
import { Server, waitUntil } from "./helpers.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

/** A real WebSocket whose network path is blocked: it connects to a closed port. */
class BlockedWebSocket extends WebSocket {
  constructor(_url, protocols) {
    super("ws://127.0.0.1:1/ws", protocols);
  }
}

/** fetch with SSE (and the health check it opens with) blocked. */
const noSse = (url, init) =>
  /\/sse|\/healthz/.test(String(url)) ? Promise.reject(new TypeError("blocked by the network")) : fetch(url, init);

async function roundTrip(c, channel) {
  const got = [];
  await c.subscribe(channel, { onPublication: (p) => got.push(p.json()) });
  const other = new Client(server.wsUrl, { WebSocket });
  await other.connect();
  await other.publish(channel, { hello: channel });
  await c.publish(channel, { self: true });
  await waitUntil(() => got.length === 2, "two publications");
  other.close();
  return got;
}

test("WebSocket blocked: falls back to SSE", async () => {
  const c = new Client(server.url, { WebSocket: BlockedWebSocket, reconnect: { initialDelay: 50 } });
  const kinds = [];
  c.on("connected", (info) => kinds.push(info.transport));
  try {
    await c.connect();
    assert.deepEqual(kinds, ["sse"]);
    assert.equal(c.transportKind, "sse");
    assert.deepEqual(await roundTrip(c, "fb.sse"), [{ hello: "fb.sse" }, { self: true }]);
  } finally {
    c.close();
  }
});

test("WebSocket and SSE blocked: falls back to long-polling", async () => {
  const c = new Client(server.url, { WebSocket: BlockedWebSocket, fetch: noSse, reconnect: { initialDelay: 50 } });
  try {
    await c.connect();
    assert.equal(c.transportKind, "longpoll");
    assert.deepEqual(await roundTrip(c, "fb.poll"), [{ hello: "fb.poll" }, { self: true }]);
    const members = await c.presence("fb.poll");
    assert.equal(members.length, 1);
  } finally {
    c.close();
  }
});

test("WebSocket works: it is used", async () => {
  const c = new Client(server.url, { WebSocket });
  try {
    await c.connect();
    assert.equal(c.transportKind, "websocket");
  } finally {
    c.close();
  }
});

test("URLs: one base gives every transport's endpoint", () => {
  assert.deepEqual(endpoints("ws://h:1/ws"), { wsUrl: "ws://h:1/ws", httpUrl: "http://h:1" });
  assert.deepEqual(endpoints("https://h/app/"), { wsUrl: "wss://h/app/ws", httpUrl: "https://h/app" });
  assert.throws(() => endpoints("ftp://h"), /scheme/);
});
