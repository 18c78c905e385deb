// `play` (docs/protocol.md §5f) through Client.play against a real server,
// over WebSocket in both encodings and over long-polling: join or create
// fills a table seat by seat and opens another only when it is full; a
// private table is created with a code that a second client joins by, and
// that nobody else lands at or watches; and each refusal rejects with its
// numbered ReplyError: 121 unknown code, 120 unknown game, 116 a full
// private table or a `sit` at a table made by `play`, 103 bad arguments,
// 107 the per-user cap. A table left empty closes: its watchers get
// `unseat` 115 and its code stops working (121).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { Client, ErrorCode, ReplyError } from "../dist/index.js";
import { Server, sleep, waitUntil } from "./helpers.mjs";

// Small caps and a short empty time, so that the tests can reach them.
const MAX_PER_USER = 2;
const server = new Server(["--play-max-tables-per-user", String(MAX_PER_USER), "--play-empty-close", "1"]);
before(() => server.start());
after(() => server.stop());

const CODE = /^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{6}$/;

// Each case plays at its own timing profile (a different attribute, so a
// different set of tables): the cases share one server.
const CASES = [
  { name: "websocket json", transports: ["websocket"], encoding: "json", timing: "normal" },
  { name: "websocket binary", transports: ["websocket"], encoding: "binary", timing: "express" },
  { name: "long-polling", transports: ["longpoll"], encoding: "json", timing: "super-express" },
];

/** `n` connected clients of case `c`; `close()` closes them all. */
async function clients(c, n) {
  const list = Array.from({ length: n }, (_, i) =>
    new Client(server.wsUrl, { WebSocket, transports: c.transports, encoding: c.encoding, name: `player ${i}` }));
  await Promise.all(list.map((x) => x.connect()));
  return Object.assign(list, { close: () => list.forEach((x) => x.close()) });
}

/** Rejects with the ReplyError of `code`. */
async function refused(promise, code) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof ReplyError, `not a ReplyError: ${e}`);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

/** The lobby's entries under `path`, polled until `done(entries)` holds. */
async function lobbyUntil(client, path, done) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { tables } = await client.lobby(path);
    await client.lobbyOff(path);
    if (done(tables)) return tables;
    if (Date.now() > deadline) throw new Error(`lobby ${path}: ${JSON.stringify(tables)}`);
    await sleep(100);
  }
}

const attrsOf = (entry) => JSON.parse(new TextDecoder().decode(entry.attrs));

for (const c of CASES) {
  test(`${c.name}: 7 players asking at once for a 6-seat game fill one table and open a second`, async () => {
    const players = await clients(c, 7);
    try {
      const attrs = { timing: c.timing };
      const got = await Promise.all(players.map((p) => p.play({ game: "holdem", seats: 6, attrs })));
      const byTable = new Map();
      for (const r of got) byTable.set(r.table, [...(byTable.get(r.table) ?? []), r]);
      assert.equal(byTable.size, 2, JSON.stringify(got));
      const [full, second] = [...byTable.values()].sort((a, b) => b.length - a.length);
      assert.equal(full.length, 6);
      assert.equal(second.length, 1);
      // Distinct seats at the full table, each table created by exactly one of them.
      assert.equal(new Set(full.map((r) => r.seat)).size, 6);
      assert.ok(full.every((r) => r.seat < 6));
      assert.equal(full.filter((r) => r.created).length, 1);
      assert.equal(second[0].created, true);
      for (const r of got) {
        assert.equal(r.code, undefined, "a public table has no code");
        assert.equal(attrsOf({ attrs: r.data }).t, "state", "the private snapshot, as `sit` gives it");
      }
      // The lobby lists both under GAME/SEATS-seat/TIMING, marked as made by play.
      const tables = await lobbyUntil(players[0], `holdem/6-seat/${c.timing}`, (ts) =>
        ts.length === 2 && ts.map((t) => t.players).sort().join() === "1,6");
      for (const t of tables) {
        assert.equal(t.seats, 6);
        assert.equal(attrsOf(t).play, true);
        assert.equal(attrsOf(t).private, undefined);
      }
      // A `sit` at a table made by play is refused (116: join with play),
      // though it has free seats; seated as after `sit`, `stand` gives the
      // seat up, and a second `stand` finds none.
      const [first] = full;
      const who = players[got.indexOf(first)];
      await refused(who.sit(second[0].table), ErrorCode.SeatUnavailable);
      await who.stand(first.table);
      await refused(who.stand(first.table), ErrorCode.NotAtTable);
      // Asking again fills a free seat rather than opening a third table.
      const again = await who.play({ game: "holdem", seats: 6, attrs });
      assert.equal(again.created, false);
      assert.ok(again.table === first.table || again.table === second[0].table);
    } finally {
      players.close();
    }
  });

  test(`${c.name}: a private table is joined by its code, by nobody else, and not watched`, async () => {
    const [owner, friend, stranger, third] = await clients(c, 4);
    try {
      const mine = await owner.play({ game: "holdem", seats: 2, attrs: { timing: c.timing }, private: true, data: { buyin: 500 } });
      assert.equal(mine.created, true);
      assert.match(mine.code, CODE);
      // The buy-in went to the game with the seat.
      const state = attrsOf({ attrs: mine.data });
      assert.equal(state.seats.find((s) => s.seat === mine.seat)?.stack, 500, JSON.stringify(state));
      const joined = await friend.play({ code: mine.code });
      assert.equal(joined.table, mine.table);
      assert.notEqual(joined.seat, mine.seat);
      assert.equal(joined.created, false);
      assert.equal(joined.code, mine.code);
      // Join-or-create with the same game, seats and attributes never lands there.
      const other = await stranger.play({ game: "holdem", seats: 2, attrs: { timing: c.timing } });
      assert.notEqual(other.table, mine.table);
      assert.equal(other.created, true);
      // Full: 116. Watched by nobody: 104.
      await refused(third.play({ code: mine.code }), ErrorCode.SeatUnavailable);
      await refused(third.watch(mine.table), ErrorCode.PermissionDenied);
      const listed = (await lobbyUntil(owner, `holdem/2-seat/${c.timing}`, (ts) => ts.some((t) => t.table === mine.table)))
        .find((t) => t.table === mine.table);
      assert.equal(attrsOf(listed).private, true);
      assert.equal(attrsOf(listed).play, true);
    } finally {
      for (const x of [owner, friend, stranger, third]) x.close();
    }
  });

  test(`${c.name}: refusals reject with their codes (121, 120, 103)`, async () => {
    const [p] = await clients(c, 1);
    try {
      // No code has a 0, an O, a 1 or an I: this one is nobody's.
      await refused(p.play({ code: "0O1I00" }), ErrorCode.UnknownCode);
      await refused(p.play({ game: "no-such-game", seats: 2 }), ErrorCode.UnknownGame);
      await refused(p.play({ game: "holdem", seats: 0 }), ErrorCode.BadRequest);
      await refused(p.play({ game: "holdem", seats: 65 }), ErrorCode.BadRequest);
      await refused(p.play({ game: "holdem", seats: 2, attrs: { timing: "no-such-timing" } }), ErrorCode.BadRequest);
      await refused(p.play({ game: "", seats: 2 }), ErrorCode.BadRequest);
      // The connection is fine afterwards.
      assert.ok((await p.ping()) >= 0);
    } finally {
      p.close();
    }
  });
}

test("attributes that are not scalars are refused by the server (103), as are both a code and a game", async () => {
  const c = CASES[0];
  const [p] = await clients(c, 1);
  try {
    await refused(p.play({ game: "holdem", seats: 2, attrs: { nested: { a: 1 } } }), ErrorCode.BadRequest);
    await refused(p.play({ game: "holdem", seats: 2, code: "ABCDEF" }), ErrorCode.BadRequest);
  } finally {
    p.close();
  }
});

test("one user creating more tables than the cap allows is refused (107); joining is not capped", async () => {
  const [p, friend] = await clients(CASES[0], 2);
  try {
    const made = [];
    for (let i = 0; i < MAX_PER_USER; i++) made.push(await p.play({ game: "holdem", seats: 4, private: true }));
    await refused(p.play({ game: "holdem", seats: 4, private: true }), ErrorCode.LimitExceeded);
    await refused(p.play({ game: "holdem", seats: 5 }), ErrorCode.LimitExceeded);
    // Others still join the tables that user made.
    const joined = await friend.play({ code: made[0].code });
    assert.equal(joined.table, made[0].table);
  } finally {
    p.close();
    friend.close();
  }
});

test("a table left empty closes: its watcher gets unseat 115, its code then answers 121", async () => {
  const [player, watcher, later] = await clients(CASES[0], 3);
  try {
    const pub = await player.play({ game: "holdem", seats: 7 });
    const priv = await player.play({ game: "holdem", seats: 7, private: true });
    const unseats = [];
    watcher.on("unseat", (u) => unseats.push(u));
    await watcher.watch(pub.table);
    await player.stand(pub.table);
    await player.stand(priv.table);
    await waitUntil(() => unseats.length > 0, "the watcher unseated", 10_000);
    assert.equal(unseats[0].table, pub.table);
    assert.equal(unseats[0].code, ErrorCode.UnknownTable);
    // Closed with it: the private table, gone from the lobby, and its code.
    await lobbyUntil(later, "holdem/7-seat", (ts) => !ts.some((t) => t.table === priv.table || t.table === pub.table));
    await refused(later.play({ code: priv.code }), ErrorCode.UnknownCode);
  } finally {
    for (const c of [player, watcher, later]) c.close();
  }
});
