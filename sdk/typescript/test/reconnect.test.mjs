// Reconnect with backoff and recovery from stored positions, on every
// transport: drop the network (a proxy resets every connection and refuses
// new ones for a while) or restart the server, and check that nothing is lost
// or duplicated when recovery is possible, and that the application is told
// to resynchronise when it is not.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket, { WebSocketServer } from "ws";
import {
  Client, DisconnectedError, shouldReconnect, backoffDelay, DEFAULT_RECONNECT, ConnectError, ConnectionLostError, ReplyError, ErrorCode,
} from "../dist/index.js";
import { Proxy, Server, sleep, waitUntil, freePort } from "./helpers.mjs";

const server = new Server();
let proxy;
before(async () => {
  await server.start();
  proxy = new Proxy(server.port);
  await proxy.start();
});
after(async () => {
  await proxy.stop();
  await server.stop();
});

const FAST = { initialDelay: 50, maxDelay: 200 };

const CASES = [
  { name: "websocket json", transports: ["websocket"], encoding: "json" },
  { name: "websocket binary", transports: ["websocket"], encoding: "binary" },
  { name: "long-polling", transports: ["longpoll"], encoding: "json" },
  { name: "sse", transports: ["sse"], encoding: "json" },
];

for (const c of CASES) {
  test(`${c.name}: a dropped network is recovered from, no publication lost or duplicated`, async () => {
    const channel = `drop.${c.name.replace(/\W/g, "")}`;
    const sub = new Client(`ws://127.0.0.1:${proxy.port}/ws`, { WebSocket, reconnect: FAST, transports: c.transports, encoding: c.encoding });
    const pub = new Client(server.wsUrl, { WebSocket });
    const got = [];
    const disconnects = [];
    let resyncs = 0;
    let connects = 0;
    sub.on("disconnected", (d) => disconnects.push(d));
    sub.on("connected", () => connects++);
    try {
      await sub.connect();
      await pub.connect();
      await sub.subscribe(channel, { onPublication: (p) => got.push(p.json()), onResync: () => resyncs++ });
      for (let i = 1; i <= 10; i++) await pub.publish(channel, i);
      await waitUntil(() => got.length === 10, "first ten");
      proxy.pause();
      await waitUntil(() => disconnects.length === 1, "the drop to be noticed");
      assert.equal(disconnects[0].reconnect, true);
      for (let i = 11; i <= 30; i++) await pub.publish(channel, i);
      await sleep(100); // a few failed reconnect attempts
      proxy.resume();
      await waitUntil(() => connects === 2, "reconnect");
      for (let i = 31; i <= 40; i++) await pub.publish(channel, i);
      await waitUntil(() => got.length >= 40, "all forty");
      await sleep(50);
      assert.deepEqual(got, [...Array(40).keys()].map((i) => i + 1));
      assert.equal(resyncs, 0);
      assert.equal(sub.state, "connected");
    } finally {
      proxy.resume();
      sub.close();
      pub.close();
    }
  });
}

for (const c of CASES) {
  test(`${c.name}: a connection dropped before the first publication recovers what was published meanwhile`, async () => {
    const channel = `early.${c.name.replace(/\W/g, "")}`;
    const sub = new Client(`ws://127.0.0.1:${proxy.port}/ws`, { WebSocket, reconnect: FAST, transports: c.transports, encoding: c.encoding });
    const pub = new Client(server.wsUrl, { WebSocket });
    const got = [];
    let resyncs = 0;
    let connects = 0;
    let disconnects = 0;
    sub.on("disconnected", () => disconnects++);
    sub.on("connected", () => connects++);
    try {
      await sub.connect();
      await pub.connect();
      await pub.publish(channel, 0); // the channel exists, with a history
      await sub.subscribe(channel, { onPublication: (p) => got.push(p.json()), onResync: () => resyncs++ });
      // SSE learns its starting position from an id sent alone after the
      // subscribe (no event): give it a moment to arrive.
      await sleep(300);
      proxy.pause();
      await waitUntil(() => disconnects === 1, "the drop to be noticed");
      for (let i = 1; i <= 10; i++) await pub.publish(channel, i);
      proxy.resume();
      await waitUntil(() => connects === 2, "reconnect");
      await waitUntil(() => got.length >= 10, "all ten");
      await sleep(50);
      assert.deepEqual(got, [...Array(10).keys()].map((i) => i + 1));
      assert.equal(resyncs, 0);
    } finally {
      proxy.resume();
      sub.close();
      pub.close();
    }
  });
}

for (const c of CASES) {
  test(`${c.name}: after a server restart, recovery is impossible and the application is told to resync`, async () => {
    const own = new Server();
    await own.start();
    const channel = "restart";
    const sub = new Client(own.wsUrl, { WebSocket, reconnect: FAST, transports: c.transports, encoding: c.encoding });
    const got = [];
    const resyncs = [];
    try {
      await sub.connect();
      const s = await sub.subscribe(channel, { onPublication: (p) => got.push(p.json()), onResync: (r) => resyncs.push(r) });
      const pub1 = new Client(own.wsUrl, { WebSocket });
      await pub1.connect();
      for (let i = 1; i <= 3; i++) await pub1.publish(channel, i);
      pub1.close();
      await waitUntil(() => got.length === 3, "three before the restart");
      const before = s.position;
      await own.stop();
      await own.start();
      const pub2 = new Client(own.wsUrl, { WebSocket, reconnect: FAST });
      await pub2.connect();
      await waitUntil(() => s.active, "re-subscribed", 15_000);
      for (let i = 4; i <= 6; i++) await pub2.publish(channel, i);
      await waitUntil(() => got.length === 6, "three after the restart");
      pub2.close();
      assert.deepEqual(got, [1, 2, 3, 4, 5, 6]);
      assert.ok(resyncs.length >= 1, "resync reported");
      assert.equal(resyncs[0].recovered, false);
      assert.equal(resyncs[0].needsResync, true);
      assert.notEqual(s.position.epoch, before.epoch);
    } finally {
      sub.close();
      await own.stop();
    }
  });
}

/** A real WebSocket server that answers connect, then closes with `code`. */
async function closingServer(code) {
  const port = await freePort();
  const wss = new WebSocketServer({ host: "127.0.0.1", port, handleProtocols: (p) => [...p][0] });
  let connections = 0;
  wss.on("connection", (ws) => {
    connections++;
    ws.on("message", (raw) => {
      const id = JSON.parse(raw.toString()).id;
      ws.send(JSON.stringify({ id, connect: { client: `c${connections}`, version: "test", ping_interval: 25 } }));
      setTimeout(() => ws.close(code, "bye"), 20);
    });
  });
  await new Promise((r) => wss.once("listening", r));
  return { url: `ws://127.0.0.1:${port}/ws`, connections: () => connections, close: () => new Promise((r) => wss.close(r)) };
}

test("a 'do not reconnect' code (3502) closes the client for good", async () => {
  const srv = await closingServer(3502);
  const c = new Client(srv.url, { WebSocket, reconnect: FAST, transports: ["websocket"] });
  let closedWith;
  c.on("closed", (e) => (closedWith = e));
  try {
    await c.connect();
    await waitUntil(() => closedWith !== undefined, "closed");
    assert.ok(closedWith instanceof DisconnectedError);
    assert.equal(closedWith.code, 3502);
    assert.equal(c.state, "closed");
    await sleep(300);
    assert.equal(srv.connections(), 1);
    await assert.rejects(c.publish("x", 1), /closed/);
  } finally {
    c.close();
    await srv.close();
  }
});

for (const [code, name] of [[3001, "slow consumer"], [3004, "broker state lost"]]) {
  test(`a 'reconnect' code (${code} ${name}) reconnects with backoff`, async () => {
    const srv = await closingServer(code);
    const c = new Client(srv.url, { WebSocket, reconnect: FAST, transports: ["websocket"] });
    const disconnects = [];
    c.on("disconnected", (d) => disconnects.push(d));
    try {
      await c.connect();
      await waitUntil(() => srv.connections() >= 3, "three connections");
      assert.equal(disconnects[0].code, code);
      assert.equal(disconnects[0].reconnect, true);
    } finally {
      c.close();
      await srv.close();
    }
  });
}

test("stableAfter: connections that end sooner count as failed attempts; longer ones restart the count", async () => {
  // Each connection is closed with 3001 (a "reconnect" code) 20 ms after its
  // connect reply. With the default stableAfter (5 s) every one counts as a
  // failed attempt, so maxAttempts gives up; when every connection counts as
  // stable (stableAfter 0) the count restarts each time and it never does.
  const srv = await closingServer(3001);
  const flapping = new Client(srv.url, { WebSocket, reconnect: { ...FAST, maxAttempts: 3 }, transports: ["websocket"] });
  let closedWith;
  flapping.on("closed", (e) => (closedWith = e));
  try {
    await flapping.connect();
    await waitUntil(() => closedWith !== undefined, "giving up");
    assert.ok(closedWith instanceof ConnectionLostError);
    assert.match(closedWith.message, /gave up after 3 attempts/);
    assert.equal(srv.connections(), 4); // the first one and three retries
    assert.equal(flapping.state, "closed");
  } finally {
    flapping.close();
    await srv.close();
  }

  const srv2 = await closingServer(3001);
  const stable = new Client(srv2.url, { WebSocket, reconnect: { ...FAST, maxAttempts: 3, stableAfter: 0 }, transports: ["websocket"] });
  try {
    await stable.connect();
    await waitUntil(() => srv2.connections() >= 8, "reconnects past maxAttempts");
    assert.notEqual(stable.state, "closed");
  } finally {
    stable.close();
    await srv2.close();
  }
});

test("connect() rejects with ConnectError when no transport reaches the server", async () => {
  const port = await freePort();
  const c = new Client(`http://127.0.0.1:${port}`, { WebSocket, reconnect: FAST, connectTimeout: 2000 });
  await assert.rejects(c.connect(), (e) => e instanceof ConnectError && /websocket, sse, longpoll/.test(e.message));
  assert.equal(c.state, "closed");
});

test("shouldReconnect follows docs/protocol.md §7.2", () => {
  for (const code of [null, 1000, 1001, 3000, 3001, 3002, 3003, 3004, 3499]) assert.equal(shouldReconnect(code), true, String(code));
  for (const code of [1002, 1007, 1009, 3500, 3501, 3502, 3503, 3999]) assert.equal(shouldReconnect(code), false, String(code));
});

test("backoff is exponential, bounded and fully jittered", () => {
  const p = { ...DEFAULT_RECONNECT, initialDelay: 100, maxDelay: 1000 };
  assert.equal(backoffDelay(p, 0, () => 1), 100);
  assert.equal(backoffDelay(p, 3, () => 1), 800);
  assert.equal(backoffDelay(p, 4, () => 1), 1000);
  assert.equal(backoffDelay(p, 1000, () => 1), 1000);
  assert.equal(backoffDelay(p, 5, () => 0), 0);
  const samples = Array.from({ length: 200 }, () => backoffDelay(p, 2));
  assert.ok(samples.every((d) => d >= 0 && d <= 400));
  assert.ok(new Set(samples).size > 100, "jittered");
});

test("a silent server is noticed (ping after ping_interval, dead after twice that) and left for a new connection", async () => {
  const own = new Server(["--ping-interval", "1"]);
  await own.start();
  const px = new Proxy(own.port);
  await px.start();
  const c = new Client(`ws://127.0.0.1:${px.port}/ws`, { WebSocket, reconnect: FAST, transports: ["websocket"] });
  const disconnects = [];
  let connects = 0;
  c.on("disconnected", (d) => disconnects.push(d));
  c.on("connected", () => connects++);
  try {
    await c.connect();
    px.freeze();
    await waitUntil(() => connects === 2, "a new connection after the silence", 15_000);
    assert.equal(disconnects[0].code, null);
    assert.match(disconnects[0].reason, /silent/);
    assert.ok((await c.ping()) >= 0);
  } finally {
    c.close();
    await px.stop();
    await own.stop();
  }
});

test("an undecodable server message ends that connection and the client reconnects", async () => {
  const port = await freePort();
  const wss = new WebSocketServer({ host: "127.0.0.1", port, handleProtocols: (p) => [...p][0] });
  let connections = 0;
  wss.on("connection", (ws) => {
    connections++;
    ws.on("message", (raw) => {
      const id = JSON.parse(raw.toString()).id;
      ws.send(JSON.stringify({ id, connect: { client: "c", version: "test", ping_interval: 25 } }));
      ws.send('{"pub":{"channel":"x","offset":"not a number","data":1}}');
    });
  });
  await new Promise((r) => wss.once("listening", r));
  const c = new Client(`ws://127.0.0.1:${port}/ws`, { WebSocket, reconnect: FAST, transports: ["websocket"] });
  const disconnects = [];
  c.on("disconnected", (d) => disconnects.push(d));
  try {
    await c.connect();
    await waitUntil(() => connections >= 2, "a second connection");
    assert.match(disconnects[0].reason, /undecodable server message: invalid/);
    assert.equal(disconnects[0].reconnect, true);
  } finally {
    c.close();
    await new Promise((r) => wss.close(r));
  }
});

test("bad arguments are refused with clear errors", async () => {
  assert.throws(() => new Client("ftp://x"), /scheme/);
  assert.throws(() => new Client("ws://x", { transports: [] }), /at least one transport/);
  assert.throws(() => new Client("ws://x", { encoding: "binary", transports: ["sse"] }), /binary encoding needs the websocket/);
  const c = new Client(server.wsUrl, { WebSocket });
  await assert.rejects(c.publish("x", 1), /call connect\(\) first/);
  try {
    await c.connect();
    await assert.rejects(c.publish("x", undefined), /cannot be sent as JSON/);
    await assert.rejects(c.publish("x", 10n), TypeError);
  } finally {
    c.close();
  }
  await assert.rejects(c.connect(), /closed/);
});

/** A real WebSocket server that refuses `connect` with 112 (token expired)
 * unless the token is "fresh-2" or later, and records the tokens it saw. */
async function tokenServer() {
  const port = await freePort();
  const wss = new WebSocketServer({ host: "127.0.0.1", port, handleProtocols: (p) => [...p][0] });
  const tokens = [];
  wss.on("connection", (ws) => {
    ws.on("message", (raw) => {
      const m = JSON.parse(raw.toString());
      if (!m.connect) return;
      tokens.push(m.connect.token ?? null);
      const ok = /^fresh-[2-9]$/.test(m.connect.token ?? "");
      ws.send(JSON.stringify(ok
        ? { id: m.id, connect: { client: "c", version: "test", ping_interval: 25 } }
        : { id: m.id, error: { code: 112, message: "token expired" } }));
    });
  });
  await new Promise((r) => wss.once("listening", r));
  return { url: `ws://127.0.0.1:${port}/ws`, tokens, close: () => new Promise((r) => wss.close(r)) };
}

test("a token function is asked before every attempt; an expired token (112) is refreshed", async () => {
  const srv = await tokenServer();
  let n = 0;
  const c = new Client(srv.url, { WebSocket, reconnect: FAST, transports: ["websocket"], token: async () => `fresh-${++n}` });
  try {
    await c.connect();
    assert.deepEqual(srv.tokens, ["fresh-1", "fresh-2"]);
    assert.equal(c.state, "connected");
  } finally {
    c.close();
    await srv.close();
  }
});

test("a fixed token refused with 112 ends the client: it cannot be refreshed", async () => {
  const srv = await tokenServer();
  const c = new Client(srv.url, { WebSocket, reconnect: FAST, transports: ["websocket"], token: "stale" });
  try {
    await assert.rejects(c.connect(), (e) => e instanceof ReplyError && e.code === ErrorCode.TokenExpired);
    assert.deepEqual(srv.tokens, ["stale"]);
    assert.equal(c.state, "closed");
  } finally {
    c.close();
    await srv.close();
  }
});

test("a failing token function fails the first connect with ConnectError", async () => {
  const c = new Client(server.wsUrl, { WebSocket, token: () => { throw new Error("no token service"); } });
  await assert.rejects(c.connect(), (e) => e instanceof ConnectError && /no token service/.test(e.message));
});
