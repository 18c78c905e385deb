// The Lobby class (src/lobby.ts): a snapshot plus every newer update equals
// a fresh snapshot; stale, duplicate and other-branch updates change nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Lobby, utf8 } from "../dist/index.js";

const entry = (table, players, path = "holdem/10-seat/express") =>
  ({ table, path, seats: 10, players, watchers: 0, attrs: utf8("{}") });
const update = (seq, tables = [], removed = [], path = "holdem") =>
  ({ type: "lobbyUpdate", path, seq, tables, removed });

test("updates with a higher seq apply, in order; the result equals a fresh snapshot", () => {
  const lobby = new Lobby("holdem");
  lobby.reset({ seq: 10, tables: [entry(1, 0), entry(2, 5), entry(3, 9)] });
  assert.equal(lobby.apply(update(11, [entry(1, 1), entry(4, 0)], [3])), true);
  assert.equal(lobby.apply(update(14, [entry(1, 2)], [2])), true);
  assert.equal(lobby.seq, 14);
  const fresh = new Lobby("holdem");
  fresh.reset({ seq: 14, tables: [entry(1, 2), entry(4, 0)] });
  assert.deepEqual([...lobby.tables.entries()].sort(), [...fresh.tables.entries()].sort());
});

test("stale, repeated, early and other-branch updates are ignored", () => {
  const lobby = new Lobby("holdem");
  assert.equal(lobby.apply(update(1, [entry(9, 9)])), false, "before any snapshot");
  lobby.reset({ seq: 10, tables: [entry(1, 0)] });
  assert.equal(lobby.apply(update(10, [entry(1, 7)])), false, "not newer than the snapshot");
  assert.equal(lobby.apply(update(9, [], [1])), false, "older than the snapshot");
  assert.equal(lobby.apply(update(12, [entry(1, 3)], [], "chess")), false, "another branch");
  assert.equal(lobby.tables.get(1)?.players, 0);
  assert.equal(lobby.apply(update(12, [entry(1, 3)])), true);
  assert.equal(lobby.apply(update(12, [], [1])), false, "the same seq twice");
  assert.equal(lobby.tables.get(1)?.players, 3);
});

test("reset replaces everything", () => {
  const lobby = new Lobby();
  lobby.reset({ seq: 5, tables: [entry(1, 0), entry(2, 0)] });
  lobby.reset({ seq: 3, tables: [entry(7, 1)] });
  assert.deepEqual([...lobby.tables.keys()], [7]);
  assert.equal(lobby.seq, 3);
});

test("the core hands game pushes over as 'game' events and routes game replies by id", async () => {
  const { ClientCore } = await import("../dist/index.js");
  const core = new ClientCore(null, null);
  const connect = core.startConnect();
  core.receive({ type: "connectReply", id: connect.id, client: "c1", version: "v", pingInterval: 25 });
  const pushes = [
    update(1),
    { type: "game", table: 7, data: utf8("{}") },
    { type: "seat", table: 7, seat: 2, user: "u1", status: "away" },
    { type: "unseat", table: 7, code: 115, reason: "closed" },
  ];
  for (const p of pushes) assert.deepEqual(core.receive(p), [{ type: "game", push: p }]);
  const reply = { type: "sitReply", id: 9, seat: 2, data: utf8("{}") };
  assert.deepEqual(core.receive(reply), [{ type: "reply", reply }]);
});

// A snapshot in pages (§5e): pages and the updates between them apply in
// the order received, then the reply's entries; then newer updates only.
const page = (tables, path = "holdem") => ({ type: "lobbyPage", path, tables });
const sorted = (lobby) => [...lobby.tables.entries()].sort((a, b) => a[0] - b[0]);

test("a snapshot in pages with updates between them equals the fresh snapshot", () => {
  const lobby = new Lobby("holdem");
  lobby.begin();
  assert.equal(lobby.loading, true);
  assert.equal(lobby.ready, false);
  // An update may come before the first page: the subscription has started.
  assert.equal(lobby.apply(update(21, [entry(8, 1)])), true);
  assert.equal(lobby.page(page([entry(1, 0), entry(2, 0), entry(3, 0)])), true);
  assert.equal(lobby.apply(update(22, [entry(2, 5), entry(10, 0)], [3])), true);
  assert.equal(lobby.page(page([entry(4, 0), entry(5, 0)])), true);
  assert.equal(lobby.apply(update(23, [], [4])), true);
  assert.equal(lobby.ready, false, "not ready before the reply");
  // The reply's seq is below the interleaved updates'.
  lobby.finish({ seq: 20, tables: [entry(6, 0), entry(10, 2)] });
  assert.equal(lobby.loading, false);
  assert.equal(lobby.ready, true);
  assert.equal(lobby.seq, 23, "the last seq applied, not the reply's");
  assert.equal(lobby.apply(update(23, [entry(1, 9)])), false, "an update already applied");
  assert.equal(lobby.apply(update(22, [], [1])), false, "an older one");
  assert.equal(lobby.apply(update(24, [entry(1, 1)])), true);
  const fresh = new Lobby("holdem");
  fresh.reset({ seq: 24, tables: [entry(1, 1), entry(2, 5), entry(5, 0), entry(6, 0), entry(8, 1), entry(10, 2)] });
  assert.deepEqual(sorted(lobby), sorted(fresh));
  assert.equal(lobby.seq, fresh.seq);
});

test("pages without updates: the seq is the reply's, and the reply adds to the pages", () => {
  const lobby = new Lobby();
  lobby.begin();
  lobby.page(page([entry(1, 0), entry(2, 0)], ""));
  lobby.page(page([], ""));
  lobby.finish({ seq: 7, tables: [entry(3, 0)] });
  assert.deepEqual([...lobby.tables.keys()].sort(), [1, 2, 3]);
  assert.equal(lobby.seq, 7);
  assert.equal(lobby.ready, true);
});

test("pages for another branch, or with no snapshot begun, are ignored; begin forgets everything", () => {
  const lobby = new Lobby("holdem");
  assert.equal(lobby.page(page([entry(1, 0)])), false, "no snapshot begun");
  lobby.begin();
  assert.equal(lobby.page(page([entry(1, 0)], "chess")), false, "another branch");
  assert.equal(lobby.apply(update(5, [entry(2, 0)], [], "chess")), false, "another branch");
  lobby.finish({ seq: 3, tables: [entry(3, 0)] });
  assert.deepEqual([...lobby.tables.keys()], [3]);
  assert.equal(lobby.page(page([entry(4, 0)])), false, "after the reply");
  // A new subscription (e.g. after a reconnect) starts over.
  lobby.begin();
  assert.equal(lobby.tables.size, 0);
  assert.equal(lobby.seq, -1);
  assert.equal(lobby.apply(update(2, [entry(5, 0)])), true, "a lower seq than before: a new snapshot");
  lobby.finish({ seq: 1, tables: [] });
  assert.deepEqual([...lobby.tables.keys()], [5]);
  assert.equal(lobby.seq, 2);
});

test("finish without begin is reset", () => {
  const lobby = new Lobby();
  lobby.reset({ seq: 5, tables: [entry(1, 0)] });
  lobby.finish({ seq: 6, tables: [entry(2, 0)] });
  assert.deepEqual([...lobby.tables.keys()], [2]);
  assert.equal(lobby.seq, 6);
});

test("the core hands lobby_page pushes over as 'game' events", async () => {
  const { ClientCore } = await import("../dist/index.js");
  const core = new ClientCore(null, null);
  const connect = core.startConnect();
  core.receive({ type: "connectReply", id: connect.id, client: "c1", version: "v", pingInterval: 25 });
  const p = page([entry(1, 0)]);
  assert.deepEqual(core.receive(p), [{ type: "game", push: p }]);
});

// Client.lobby gathers the pages and the updates between them, with no
// server: a scripted WebSocket answers `connect` and `lobby`.
function scriptedWebSocket(encoding, script) {
  return class FakeWebSocket {
    binaryType = "arraybuffer";
    readyState = 0;
    onopen = null; onmessage = null; onclose = null; onerror = null;
    constructor(_url, protocols) {
      this.protocol = protocols[0];
      setTimeout(() => { this.readyState = 1; this.onopen?.({}); }, 0);
    }
    deliver(msgs) {
      // Every message of a burst in the same tick, as one read might give them.
      for (const m of msgs) {
        const data = encodeFor(m);
        this.onmessage?.({ data });
      }
    }
    send(data) {
      const cmd = encoding === "binary" ? decodeBinaryCommand(new Uint8Array(data.buffer ?? data, data.byteOffset ?? 0, data.byteLength)) : decodeJsonCommand(data);
      if (cmd.type === "connect") {
        setTimeout(() => this.deliver([{ type: "connectReply", id: cmd.id, client: "c1", version: "t", pingInterval: 0 }]), 0);
      } else if (cmd.type === "lobby") {
        setTimeout(() => this.deliver(script(cmd.id)), 0);
      }
    }
    close() { this.readyState = 3; }
  };
  function encodeFor(m) {
    if (encoding === "json") return encodeJson(m);
    const b = encodeBinary(m);
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  }
}

import { Client, decodeBinaryCommand, decodeJsonCommand, encodeBinary, encodeJson } from "../dist/index.js";

const burst = (id) => [
  update(11, [entry(9, 0)], [], "other"),
  page([entry(1, 0), entry(2, 0)]),
  update(12, [entry(2, 4), entry(7, 0)], [1]),
  page([entry(3, 0), entry(4, 0)]),
  { type: "lobbyReply", id, seq: 10, tables: [entry(5, 0), entry(7, 1)] },
  update(13, [entry(3, 3)]),
];
const gathered = [[2, 4], [3, 0], [4, 0], [5, 0], [7, 1]];

for (const encoding of ["json", "binary"]) {
  test(`Client.lobby gathers pages and interleaved updates (${encoding})`, async () => {
    const client = new Client("ws://fake", { encoding, transports: ["websocket"], WebSocket: scriptedWebSocket(encoding, burst) });
    const pages = [];
    client.on("lobby_page", (p) => pages.push(p));
    try {
      await client.connect();
      const snapshot = await client.lobby("holdem");
      assert.equal(snapshot.seq, 12, "the last interleaved update's seq, above the reply's");
      assert.deepEqual(snapshot.tables.map((t) => [t.table, t.players]), gathered);
      assert.equal(pages.length, 2);
      const lobby = new Lobby("holdem");
      lobby.reset(snapshot);
      assert.equal(lobby.apply(update(12, [], [2])), false, "already in the snapshot");
      assert.equal(lobby.apply(update(13, [entry(3, 3)])), true);
    } finally {
      client.close();
    }
  });

  test(`Client.lobby into a Lobby: an update in the same burst as the reply is not lost (${encoding})`, async () => {
    const client = new Client("ws://fake", { encoding, transports: ["websocket"], WebSocket: scriptedWebSocket(encoding, burst) });
    const lobby = new Lobby("holdem");
    const applied = [];
    client.on("lobby_update", (u) => { if (lobby.apply(u)) applied.push(u.seq); });
    try {
      await client.connect();
      await assert.rejects(client.lobby("chess", lobby), TypeError);
      const snapshot = await client.lobby("holdem", lobby);
      assert.equal(snapshot.seq, 12);
      assert.deepEqual(snapshot.tables.map((t) => [t.table, t.players]), gathered);
      // 12 was applied by the client while loading; 13 by the listener.
      assert.deepEqual(applied, [13]);
      assert.equal(lobby.ready, true);
      assert.equal(lobby.seq, 13);
      assert.deepEqual(sorted(lobby).map(([id, t]) => [id, t.players]), [[2, 4], [3, 3], [4, 0], [5, 0], [7, 1]]);
    } finally {
      client.close();
    }
  });
}
