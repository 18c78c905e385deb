// Connect, subscribe, publish, history, presence and unsubscribe against a
// real server, on every transport and encoding.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { Client, ReplyError, ErrorCode } from "../dist/index.js";
import { Server, waitUntil } from "./helpers.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

const FAST = { initialDelay: 50, maxDelay: 200 };
const client = (opts = {}) => new Client(server.wsUrl, { WebSocket, reconnect: FAST, ...opts });

const CASES = [
  { name: "websocket json", transports: ["websocket"], encoding: "json", full: true },
  { name: "websocket binary", transports: ["websocket"], encoding: "binary", full: true },
  { name: "long-polling", transports: ["longpoll"], encoding: "json", full: true },
  { name: "sse", transports: ["sse"], encoding: "json", full: false },
];

for (const c of CASES) {
  test(`${c.name}: subscribe, publish, receive in order, unsubscribe`, async () => {
    const a = client({ transports: c.transports, encoding: c.encoding, name: "a" });
    const b = client();
    try {
      await a.connect();
      await b.connect();
      assert.equal(a.state, "connected");
      assert.equal(a.transportKind, c.transports[0]);
      const channel = `pubsub.${c.name.replace(/\W/g, "")}`;
      const got = [];
      const sub = await a.subscribe(channel, { onPublication: (p) => got.push(p) });
      assert.ok(sub.active);
      for (let i = 1; i <= 20; i++) await b.publish(channel, { n: i });
      const pos = await a.publish(channel, "from a"); // publish through the transport under test
      assert.equal(pos.offset, 21);
      await waitUntil(() => got.length === 21, "21 publications");
      assert.deepEqual(got.slice(0, 20).map((p) => p.json().n), [...Array(20).keys()].map((i) => i + 1));
      assert.equal(got[20].json(), "from a");
      assert.deepEqual(got.map((p) => p.offset), [...Array(21).keys()].map((i) => i + 1));
      assert.equal(sub.position.offset, 21);
      // Binary payloads survive every transport.
      await b.publish(channel, new Uint8Array([0, 255, 10, 13]));
      await waitUntil(() => got.length === 22, "binary publication");
      assert.deepEqual([...got[21].data], [0, 255, 10, 13]);
      await sub.unsubscribe();
      assert.ok(sub.ended);
      await b.publish(channel, { after: true });
      const pong = await a.ping();
      assert.ok(pong >= 0);
      assert.equal(got.length, 22);
    } finally {
      a.close();
      b.close();
    }
  });

  test(`${c.name}: errors carry the protocol's numbered codes`, async () => {
    const a = client({ transports: c.transports, encoding: c.encoding });
    try {
      await a.connect();
      await assert.rejects(a.subscribe("bad channel!"), (e) => e instanceof ReplyError && e.code === ErrorCode.InvalidChannel);
      await assert.rejects(a.publish("", 1), (e) => e instanceof ReplyError && (e.code === ErrorCode.InvalidChannel || e.code === ErrorCode.BadRequest));
      if (!c.full) {
        await assert.rejects(a.history("x"), (e) => e instanceof ReplyError && e.code === ErrorCode.NotAvailable);
        await assert.rejects(a.presence("x"), (e) => e instanceof ReplyError && e.code === ErrorCode.NotAvailable);
        await assert.rejects(a.presenceStats("x"), (e) => e instanceof ReplyError && e.code === ErrorCode.NotAvailable);
      } else {
        await assert.rejects(a.presenceStats("x.*"), (e) => e instanceof ReplyError && e.code === ErrorCode.InvalidChannel);
      }
    } finally {
      a.close();
    }
  });

  if (c.full) {
    test(`${c.name}: history and presence with join/leave`, async () => {
      const a = client({ transports: c.transports, encoding: c.encoding });
      const b = client();
      try {
        await a.connect();
        await b.connect();
        const channel = `hp.${c.name.replace(/\W/g, "")}`;
        for (let i = 1; i <= 5; i++) await b.publish(channel, { i });
        const h = await a.history(channel);
        assert.deepEqual(h.publications.map((p) => p.json().i), [1, 2, 3, 4, 5]);
        const tail = await a.history(channel, { since: { epoch: h.epoch, offset: 3 } });
        assert.deepEqual(tail.publications.map((p) => p.offset), [4, 5]);
        const limited = await a.history(channel, { limit: 2 });
        assert.equal(limited.publications.length, 2);

        const joins = [];
        const leaves = [];
        await a.subscribe(channel, { joinLeave: true, onJoin: (j) => joins.push(j), onLeave: (l) => leaves.push(l) });
        const bsub = await b.subscribe(channel);
        await waitUntil(() => joins.length === 1, "join");
        assert.equal(joins[0].client, b.clientId);
        const members = await a.presence(channel);
        assert.deepEqual(new Set(members.map((m) => m.client)), new Set([a.clientId, b.clientId]));
        assert.deepEqual(await a.presenceStats(channel), { clients: 2, users: 0 });
        await bsub.unsubscribe();
        await waitUntil(() => leaves.length === 1, "leave");
        assert.deepEqual(await a.presenceStats(channel), { clients: 1, users: 0 });
        assert.equal(leaves[0].client, b.clientId);
      } finally {
        a.close();
        b.close();
      }
    });
  }
}

test("wildcard subscription routes concrete channels (websocket)", async () => {
  const a = client();
  const b = client();
  try {
    await a.connect();
    await b.connect();
    const got = [];
    await a.subscribe("wild.*", { onPublication: (p) => got.push(`${p.channel}:${p.json()}`) });
    await b.publish("wild.x", 1);
    await b.publish("wild.y.z", 2); // not matched
    await b.publish("wild.y", 3);
    await waitUntil(() => got.length === 2, "two pattern publications");
    assert.deepEqual(got, ["wild.x:1", "wild.y:3"]);
  } finally {
    a.close();
    b.close();
  }
});

test("subscribing twice to a channel is refused with 105", async () => {
  const a = client();
  try {
    await a.connect();
    await a.subscribe("twice");
    await assert.rejects(a.subscribe("twice"), (e) => e instanceof ReplyError && e.code === ErrorCode.AlreadySubscribed);
  } finally {
    a.close();
  }
});

test("in Node with `ws`, the SDK's WebSocket negotiates permessage-deflate and large pushes arrive intact, both encodings", async () => {
  for (const encoding of ["json", "binary"]) {
    const sockets = [];
    // `ws` offers the extension by default; record what each socket agreed.
    class Recording extends WebSocket {
      constructor(...args) {
        super(...args);
        sockets.push(this);
      }
    }
    const a = client({ transports: ["websocket"], encoding, WebSocket: Recording });
    const b = client();
    try {
      await a.connect();
      await b.connect();
      assert.ok(sockets.length >= 1);
      assert.match(sockets[0].extensions, /^permessage-deflate/);
      const channel = `pubsub.deflate.${encoding}`;
      const got = [];
      await a.subscribe(channel, { onPublication: (p) => got.push(p) });
      const big = "row,".repeat(2000);
      await b.publish(channel, { big });
      await a.publish(channel, { big, from: "a" }); // compressed by ws on the way in
      await waitUntil(() => got.length === 2, "two large publications");
      assert.equal(got[0].json().big, big);
      assert.equal(got[1].json().from, "a");
    } finally {
      a.close();
      b.close();
    }
  }
});
