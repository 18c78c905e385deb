// Fail-over between the nodes of a cluster: the client is given several URLs,
// skips a dead one at the first connect, and moves to the next one when its
// node dies, where its subscriptions carry on. Two real servers that do not
// share a broker: the test checks the fail-over and the delivery after it,
// not the recovery across nodes (that needs the Redis broker).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { Client, ConnectError } from "../dist/index.js";
import { Proxy, Server, freePort, waitUntil } from "./helpers.mjs";

const FAST = { initialDelay: 50, maxDelay: 200 };

/** A URL where nothing listens. */
async function deadUrl() {
  return `ws://127.0.0.1:${await freePort()}/ws`;
}

const CASES = [
  { name: "websocket", transports: ["websocket"] },
  { name: "sse", transports: ["sse"] },
  { name: "long-polling", transports: ["longpoll"] },
];

for (const c of CASES) {
  test(`${c.name}: node A is killed, the client moves to node B and keeps receiving`, async () => {
    const a = new Server();
    const b = new Server();
    await Promise.all([a.start(), b.start()]);
    const channel = `failover.${c.name.replace(/\W/g, "")}`;
    const client = new Client([a.wsUrl, b.wsUrl], { WebSocket, reconnect: FAST, transports: c.transports });
    const pubA = new Client(a.wsUrl, { WebSocket });
    const pubB = new Client(b.wsUrl, { WebSocket });
    const urls = [];
    const disconnects = [];
    const got = [];
    client.on("connected", (info) => urls.push(info.url));
    client.on("disconnected", (d) => disconnects.push(d));
    try {
      await client.connect();
      assert.equal(client.url, a.wsUrl, "the first URL first");
      const sub = await client.subscribe(channel, { onPublication: (p) => got.push(p.json()) });
      await pubA.connect();
      for (let i = 1; i <= 3; i++) await pubA.publish(channel, i);
      await waitUntil(() => got.length === 3, "three publications from A");
      pubA.close();

      await a.stop(); // SIGKILL: no goodbye, the connection just ends
      await waitUntil(() => disconnects.length === 1, "the loss of A to be noticed");
      assert.equal(disconnects[0].reconnect, true);
      await waitUntil(() => urls.length === 2 && sub.active, "re-subscribed on B", 15_000);
      assert.deepEqual(urls, [a.wsUrl, b.wsUrl]);
      assert.equal(client.url, b.wsUrl);
      assert.equal(client.transportKind, c.transports[0]);

      await pubB.connect();
      for (let i = 4; i <= 6; i++) await pubB.publish(channel, i);
      await waitUntil(() => got.length === 6, "three publications from B");
      assert.deepEqual(got, [1, 2, 3, 4, 5, 6]);
      assert.equal(client.state, "connected");
    } finally {
      client.close();
      pubA.close();
      pubB.close();
      await Promise.all([a.stop(), b.stop()]);
    }
  });
}

test("a dead first URL is skipped at the first connect, on the same transport", async () => {
  const b = new Server();
  await b.start();
  const dead = await deadUrl();
  const client = new Client([dead, b.wsUrl], { WebSocket, reconnect: FAST });
  try {
    await client.connect();
    assert.equal(client.url, b.wsUrl);
    // Every URL is tried on WebSocket before falling back to SSE.
    assert.equal(client.transportKind, "websocket");
    const got = [];
    await client.subscribe("skip", { onPublication: (p) => got.push(p.json()) });
    await client.publish("skip", "hello");
    await waitUntil(() => got.length === 1, "the publication");
    assert.deepEqual(got, ["hello"]);
  } finally {
    client.close();
    await b.stop();
  }
});

test("fallback with several URLs: each transport on every URL, then the next transport", async () => {
  const b = new Server();
  await b.start();
  const dead = await deadUrl();
  const attempts = [];
  const base = (url) => new URL(url).port;
  /** A WebSocket that is blocked on every node (as behind a proxy that refuses it). */
  class BlockedWebSocket extends WebSocket {
    constructor(url, protocols) {
      attempts.push(`websocket ${base(url)}`);
      super("ws://127.0.0.1:1/ws", protocols);
    }
  }
  const recording = (url, init) => {
    const u = new URL(String(url));
    if (u.pathname === "/healthz") attempts.push(`sse ${u.port}`);
    return fetch(url, init);
  };
  const client = new Client([dead, b.wsUrl], {
    WebSocket: BlockedWebSocket,
    fetch: recording,
    reconnect: FAST,
    transports: ["websocket", "sse"],
  });
  try {
    await client.connect();
    assert.equal(client.transportKind, "sse");
    assert.equal(client.url, b.wsUrl);
    const [d, ok] = [base(dead), String(b.port)];
    assert.deepEqual(attempts, [`websocket ${d}`, `websocket ${ok}`, `sse ${d}`, `sse ${ok}`]);
  } finally {
    client.close();
    await b.stop();
  }
});

test("after a drop, the transport is kept until it failed on every URL", async () => {
  // [A (through a proxy), dead B]: A's connection drops, the next attempt
  // (WebSocket, B) fails, and WebSocket is tried on A again before SSE.
  const a = new Server();
  await a.start();
  const proxy = new Proxy(a.port);
  await proxy.start();
  const viaProxy = `ws://127.0.0.1:${proxy.port}/ws`;
  const client = new Client([viaProxy, await deadUrl()], { WebSocket, reconnect: FAST, transports: ["websocket", "sse"] });
  const connects = [];
  client.on("connected", (info) => connects.push(`${info.transport} ${info.url}`));
  try {
    await client.connect();
    proxy.drop();
    await waitUntil(() => connects.length === 2, "the reconnect");
    assert.deepEqual(connects, [`websocket ${viaProxy}`, `websocket ${viaProxy}`]);
  } finally {
    client.close();
    await proxy.stop();
    await a.stop();
  }
});

test("connect() rejects with ConnectError naming every URL when none is reachable", async () => {
  const [d1, d2] = [await deadUrl(), await deadUrl()];
  const client = new Client([d1, d2], { WebSocket, reconnect: FAST, connectTimeout: 2000 });
  await assert.rejects(client.connect(), (e) => {
    assert.ok(e instanceof ConnectError);
    for (const d of [d1, d2]) assert.ok(e.message.includes(`127.0.0.1:${new URL(d).port}`), e.message);
    assert.match(e.message, /websocket, sse, longpoll/);
    return true;
  });
  assert.equal(client.state, "closed");
});

test("the URL list is checked at construction", () => {
  assert.throws(() => new Client([], { WebSocket }), /at least one URL/);
  assert.throws(() => new Client(["ws://h:1/ws", 42], { WebSocket }), /a URL is a string/);
  assert.throws(() => new Client(["ws://h:1/ws", "ftp://h"], { WebSocket }), /scheme/);
});
