// snake.ts: the tick loop's life, each rule of the physics on a small board
// set up through a save, steering and its refusals, respawn, dropping and
// leaving, bot matches (with the board's invariants checked every tick) and
// save/restore.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Harness } from "herald-client/game-harness";
import { load, restoreRun, table } from "./bots.mjs";

const snake = await load("snake");
const TICK = 50;
const W = 10; // the small board of the physics tests: 10 × 8, cell = y * 10 + x

/** Two players on a 10 × 8 board, their snakes and the food set by `edit` on the saved state. */
function board(edit) {
  const h = new Harness(snake.game, { seats: 2, params: { width: W, height: 8 } });
  h.sit(0, "ann");
  h.sit(1, "bob");
  const saved = JSON.parse(h.save());
  const s = saved.state;
  const put = (seat, body, dir) => Object.assign(s.snakes[seat], { body, dir, next: dir });
  // Out of the way unless a test moves it: bottom row, heading left.
  put(1, [75, 76, 77], "left");
  s.food = [0, 1, 2];
  edit(s, put);
  return Harness.restore(snake.game, JSON.stringify(saved));
}

const lastTick = (h) => h.sentTo("table").filter((m) => m.t === "tick").at(-1);

/** The board's invariants in one tick message: bodies in the grid, each cell next to the one before, no overlap, no food under a snake. */
function checkTick(msg, w, h) {
  const seen = new Set();
  for (const body of msg.s) {
    if (!body) continue;
    body.forEach((c, i) => {
      assert.ok(Number.isInteger(c) && c >= 0 && c < w * h, `cell ${c} off the board`);
      assert.ok(!seen.has(c), `cell ${c} held twice in tick ${msg.n}`);
      seen.add(c);
      if (i > 0) {
        const p = body[i - 1];
        assert.equal(Math.abs((c % w) - (p % w)) + Math.abs(Math.floor(c / w) - Math.floor(p / w)), 1, `a body broken at tick ${msg.n}`);
      }
    });
  }
  for (const f of msg.f) assert.ok(!seen.has(f), `food under a snake at tick ${msg.n}`);
}

test("the loop runs while anyone is seated: 20 ticks a second, stopped when the table empties", () => {
  const h = new Harness(snake.game, { seats: 4 });
  assert.deepEqual(h.pendingTimers(), []);
  h.sit(0, "ann");
  assert.deepEqual(h.pendingTimers(), [{ key: null, in: TICK }]);
  h.advance(1000);
  const ticks = h.sentTo("table").filter((m) => m.t === "tick");
  assert.deepEqual(ticks.map((m) => m.n), [...Array(20).keys()].map((i) => i + 1));
  assert.equal(ticks[0].s[0].length, 3, "born at the first tick, length 3");
  assert.equal(ticks[0].s.length, 4, "one entry per seat");
  assert.equal(ticks[0].f.length, 3);
  h.sit(2, "bob");
  assert.deepEqual(h.attrs, { players: 2 });
  h.leave(0);
  h.leave(2);
  assert.deepEqual(h.pendingTimers(), [], "every(0) once empty");
  assert.deepEqual(h.attrs, { players: 0 });
  assert.match(new Harness(snake.game, { seats: 9 }).sit(8, "x"), /8 players at most/);
});

test("the snapshot is the whole board, the same for players and watchers", () => {
  const h = board((s, put) => put(0, [33, 32, 31], "right"));
  const view = h.snapshot(null);
  assert.deepEqual(view, {
    t: "board",
    w: 10,
    h: 8,
    goal: 20,
    match: 1,
    n: 0,
    f: [0, 1, 2],
    snakes: [
      { user: "ann", body: [33, 32, 31], dir: "right", away: false },
      { user: "bob", body: [75, 76, 77], dir: "left", away: false },
    ],
  });
  assert.deepEqual(h.snapshot(0), view);
});

test("physics: a wall kills; food grows the snake and comes back elsewhere", () => {
  const wall = board((s, put) => put(0, [9, 8, 7], "right"));
  wall.advance(TICK);
  assert.deepEqual(lastTick(wall), { t: "tick", n: 1, s: [null, [74, 75, 76]], f: [0, 1, 2], died: [0] });

  const food = board((s, put) => {
    put(0, [22, 21, 20], "right");
    s.food = [23, 0, 1];
  });
  food.advance(TICK);
  const t = lastTick(food);
  assert.deepEqual(t.s[0], [23, 22, 21, 20]);
  assert.equal(t.f.length, 3);
  assert.deepEqual(t.f.slice(0, 2), [0, 1]);
  assert.ok(![23, 22, 21, 20, 74, 75, 76].includes(t.f[2]), "new food on a free cell");
});

test("physics: heads meeting both die; a head into any body dies; a head may follow a moving tail but not its own body", () => {
  const headOn = board((s, put) => {
    put(0, [13, 12, 11], "right");
    put(1, [15, 16, 17], "left");
  });
  headOn.advance(TICK);
  assert.deepEqual(lastTick(headOn).died, [0, 1]);

  const body = board((s, put) => {
    put(0, [31, 41, 51], "up"); // into 21, which snake 1 still holds after its move
    put(1, [23, 22, 21, 20], "right");
  });
  body.advance(TICK);
  assert.deepEqual(lastTick(body).died, [0]);
  assert.deepEqual(lastTick(body).s[1], [24, 23, 22, 21]);

  const tail = board((s, put) => put(0, [11, 21, 22, 12], "up")); // a 2 × 2 square
  assert.equal(tail.act(0, { dir: "right" }), undefined);
  tail.advance(TICK);
  assert.deepEqual(lastTick(tail).s[0], [12, 11, 21, 22], "into the cell its tail left");

  const self = board((s, put) => put(0, [11, 21, 22, 12, 13], "up"));
  self.act(0, { dir: "right" });
  self.advance(TICK);
  assert.deepEqual(lastTick(self).died, [0]);
});

test("steering: a turn takes effect at the next tick; turning back is illegal, a dead snake cannot steer, bad data is malformed", () => {
  const h = board((s, put) => put(0, [33, 32, 31], "right"));
  assert.equal(h.act(0, { dir: "left" })?.refuse, "illegal");
  for (const bad of [null, "up", { dir: "north" }, { d: "up" }, ["up"]]) assert.equal(h.act(0, bad)?.refuse, "malformed", JSON.stringify(bad));
  assert.equal(h.act(0, { dir: "down" }), undefined);
  assert.equal(h.act(0, { dir: "right" }), undefined, "the last turn before the tick counts");
  assert.equal(h.act(0, { dir: "up" }), undefined);
  h.advance(TICK);
  assert.deepEqual(lastTick(h).s[0], [23, 33, 32]);
  assert.equal(h.act(0, { dir: "down" })?.refuse, "illegal", "now moving up");

  const dead = board((s, put) => put(0, [9, 8, 7], "right"));
  dead.advance(TICK);
  assert.equal(dead.act(0, { dir: "up" })?.refuse, "out_of_turn");
});

test("a dead snake respawns after respawn_ms; a dropped one only once back", () => {
  const h = board((s, put) => put(0, [9, 8, 7], "right"));
  h.advance(TICK);
  h.advance(2000 - TICK);
  assert.equal(lastTick(h).s[0], null);
  h.advance(TICK);
  assert.equal(lastTick(h).s[0].length, 3, "back 2000 ms after dying");

  const away = board((s, put) => put(0, [9, 8, 7], "right"));
  away.drop(0);
  away.advance(5000);
  assert.equal(lastTick(away).s[0], null);
  assert.equal(away.snapshot(1).snakes[0].away, true);
  away.returnSeat(0);
  away.advance(TICK);
  assert.equal(lastTick(away).s[0].length, 3);
});

test("a leaver's snake is gone at the next tick; the others play on", () => {
  const h = board((s, put) => put(0, [33, 32, 31], "right"));
  h.leave(1);
  h.advance(TICK);
  assert.deepEqual(lastTick(h).s, [[34, 33, 32], null]);
});

test("bots play to a winner at 2 and 8 seats; the board holds its invariants every tick", () => {
  for (const n of [2, 8]) {
    const { h, bots } = table(snake, { seats: n, seed: 40 + n }, [...Array(n).keys()]);
    assert.ok(bots.run(() => h.hands === 1, 200_000), `${n} players: a winner`);
    assert.deepEqual(bots.refused, []);
    const ticks = h.sentTo("table").filter((m) => m.t === "tick");
    ticks.forEach((m) => checkTick(m, 32, 24));
    const winner = h.sentTo("table").find((m) => m.t === "winner");
    const before = ticks.at(-1);
    assert.ok(before.s[winner.seat].length >= 20, "the winner reached the goal");
    assert.ok(ticks.some((m) => m.died.length > 0), "snakes die (and respawn: the match went on)");
  }
});

test("save and restore mid-game: the restored table sends exactly what the original does", async () => {
  for (const at of [7, 150]) {
    const { straight, restored } = await restoreRun("snake", { seats: 4, seed: 3 }, [0, 1, 2, 3], at, at + 600);
    assert.ok(straight.length >= 250);
    assert.deepEqual(restored, straight, `restored at step ${at}`);
  }
});
