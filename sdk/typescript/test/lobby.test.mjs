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
