// liars-dice.ts: bot matches at every table size, the rules of a call,
// hidden dice (checked in every message each seat and watcher received, and
// in snapshots), the turn timer, refusals, leaving, dropping, save/restore.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Harness } from "herald-client/game-harness";
import { load, restoreRun, table } from "./bots.mjs";

const dice = await load("liars-dice");
const START = 3000;

/** A table with `n` players seated and the first match started; returns the harness. */
function started(n, options = {}) {
  const h = new Harness(dice.game, { seats: n, seed: 5, ...options });
  for (let s = 0; s < n; s++) assert.equal(h.sit(s, `p${s}`), undefined);
  h.advance(options.params?.start_ms ?? START);
  assert.equal(h.state.playing, true);
  return h;
}

/** The last message of type `t` the table got. */
const last = (h, t) => h.sentTo("table").filter((m) => m.t === t).at(-1);

/**
 * Checks a whole table's history: each roll went to its own seat only,
 * every call is judged right by the dice dealt, its loser has a die less
 * the next round, and a player with none is out.
 */
function checkHistory(h) {
  const rolls = new Map(); // seat → that seat's roll this round
  let round = 0;
  let expected = null; // dice per seat the next round must have, after a call
  for (const { to, msg } of h.sent) {
    if (msg.t === "dice") {
      assert.equal(typeof to, "object", "dice go to one seat");
      if (msg.round !== round) rolls.clear();
      round = msg.round;
      rolls.set(to.seat, msg.dice);
      continue;
    }
    assert.equal(typeof to, "string", "only dice go to one seat");
    assert.ok(!("dice" in msg) || msg.t === "liar", `public message with dice: ${JSON.stringify(msg)}`);
    if (msg.t === "liar") {
      // The reveal shows exactly the rolls dealt privately.
      msg.dice.forEach((d, seat) => assert.deepEqual(d, d.length ? rolls.get(seat) : [], `seat ${seat}'s revealed dice`));
      const matched = msg.dice.flat().filter((d) => d === 1 || d === msg.bid.face).length;
      assert.equal(msg.matched, matched);
      assert.equal(msg.loser === msg.seat, matched >= msg.bid.count, "the caller loses iff the bid stood");
      expected = msg.dice.map((d, seat) => d.length - (seat === msg.loser ? 1 : 0));
    }
    if (msg.t === "out") assert.equal(expected[msg.seat], 0, "out with no dice");
    if (msg.t === "winner") expected = null;
    if (msg.t === "round") {
      if (expected) assert.deepEqual(msg.counts, expected, "the loser of the call has a die less");
      expected = null;
    }
  }
}

test("bots play whole matches at every table size, with no refusal and a right history", () => {
  for (let n = 2; n <= 6; n++) {
    const { h, bots } = table(dice, { seats: n, seed: n }, [...Array(n).keys()]);
    assert.ok(bots.run(() => h.hands === 2), `${n} players: two matches`);
    assert.deepEqual(bots.refused, [], `${n} players`);
    const winners = h.sentTo("table").filter((m) => m.t === "winner");
    assert.equal(winners.length, 2);
    assert.equal(h.sentTo("table").filter((m) => m.t === "out").length, 2 * (n - 1), "all but the winner go out");
    checkHistory(h);
    assert.ok(!h.sentTo("table").some((m) => m.auto), "bots never time out");
  }
});

test("hidden dice: no seat and no watcher ever gets another's roll before the call", () => {
  const { h, bots } = table(dice, { seats: 4, seed: 11 }, [0, 1, 2, 3]);
  const views = [];
  bots.run(() => {
    // A snapshot for everyone at each step of the match.
    if (h.state.playing) for (const s of [0, 1, 2, 3, null]) views.push([s, h.snapshot(s), h.state]);
    return h.hands === 1;
  });
  for (const seat of [0, 1, 2, 3, null]) {
    for (const msg of h.receivedBy(seat)) {
      if (msg.t === "dice") assert.ok(h.sentTo({ seat }).includes(msg), "a roll only to its own seat");
      else assert.ok(!("dice" in msg) || msg.t === "liar", `seat ${seat} got ${JSON.stringify(msg)}`);
    }
  }
  assert.equal(h.sentTo("watchers").length + h.sentTo("players").length, 0);
  for (const [seat, view, state] of views) {
    assert.deepEqual(view.dice, seat === null ? undefined : state.players[seat].dice, "a snapshot shows its own dice only");
    for (const p of view.players) assert.deepEqual(Object.keys(p ?? {}).sort(), p ? ["away", "count", "user"] : []);
  }
  checkHistory(h);
});

test("a call: the rolls are shown, the loser loses a die and starts the next round", () => {
  const h = started(2);
  const turn = h.state.turn;
  const other = 1 - turn;
  const mine = h.state.players[turn].dice;
  const theirs = h.state.players[other].dice;
  // A bid of every die on a face: false unless all ten show it or a one.
  assert.equal(h.act(turn, { t: "bid", count: 10, face: 6 }), undefined);
  assert.deepEqual(last(h, "bid"), { t: "bid", seat: turn, count: 10, face: 6, turn: other, auto: false });
  assert.equal(h.act(other, { t: "liar" }), undefined);
  const call = last(h, "liar");
  const dealt = [];
  dealt[turn] = mine;
  dealt[other] = theirs;
  assert.deepEqual(call.dice, dealt);
  assert.equal(call.loser, turn);
  assert.equal(h.state.players[turn].dice.length, 4);
  assert.deepEqual(last(h, "round"), { t: "round", round: 2, counts: h.state.players.map((p) => p.dice.length), turn });
});

test("the turn timer plays for idle players until a match ends; the next starts after start_ms", () => {
  const h = started(3, { params: { turn_ms: 1000, start_ms: 500 } });
  h.advance(1000);
  assert.deepEqual(
    [last(h, "bid").count, last(h, "bid").face, last(h, "bid").auto],
    [1, 2, true],
    "an open table gets the lowest bid",
  );
  h.advance(1000);
  assert.equal(last(h, "liar").auto, true, "a bid standing gets called");
  for (let i = 0; i < 100 && h.hands === 0; i++) h.advance(1000);
  assert.equal(h.hands, 1);
  assert.equal(h.state.playing, false);
  assert.deepEqual(h.sentTo("table").at(-1), { t: "starting", ms: 500 });
  assert.deepEqual(h.attrs, { players: 3, waiting: true });
  h.advance(500);
  assert.equal(h.state.playing, true);
  assert.equal(h.state.match, 2);
  checkHistory(h);
});

test("refusals: malformed shapes, out of turn, and illegal bids", () => {
  const h = new Harness(dice.game, { seats: 3 });
  h.sit(0, "ann");
  h.sit(1, "bob");
  const refuse = (seat, data) => h.act(seat, data)?.refuse;
  for (const bad of [null, "liar", ["bid"], {}, { t: "raise" }, { t: "bid", count: "3", face: 4 }, { t: "bid", count: 2.5, face: 4 }, { t: "bid", face: 4 }]) {
    assert.equal(refuse(0, bad), "malformed", JSON.stringify(bad));
  }
  assert.equal(refuse(0, { t: "liar" }), "out_of_turn", "no match yet");
  h.advance(START);
  h.sit(2, "cy");
  assert.equal(refuse(2, { t: "bid", count: 1, face: 2 }), "out_of_turn", "sat during the match: plays the next");
  const turn = h.state.turn;
  assert.equal(refuse(1 - turn, { t: "bid", count: 1, face: 2 }), "out_of_turn");
  assert.equal(refuse(turn, { t: "liar" }), "illegal", "nothing to call");
  assert.equal(refuse(turn, { t: "bid", count: 1, face: 1 }), "illegal", "ones are wild");
  assert.equal(refuse(turn, { t: "bid", count: 1, face: 7 }), "illegal");
  assert.equal(refuse(turn, { t: "bid", count: 0, face: 3 }), "illegal");
  assert.equal(refuse(turn, { t: "bid", count: 11, face: 3 }), "illegal", "more than the dice in play");
  assert.equal(refuse(turn, { t: "bid", count: 3, face: 4 }), undefined);
  const next = 1 - turn;
  assert.equal(refuse(next, { t: "bid", count: 3, face: 3 }), "illegal", "as many of a lower face");
  assert.equal(refuse(next, { t: "bid", count: 2, face: 6 }), "illegal", "fewer dice");
  assert.equal(refuse(next, { t: "bid", count: 3, face: 5 }), undefined, "as many of a higher face");
  assert.equal(refuse(turn, { t: "bid", count: 4, face: 2 }), undefined, "more dice of a lower face");
  assert.equal(h.sit(3, "dee"), "no such seat");
  const big = new Harness(dice.game, { seats: 8 });
  assert.match(big.sit(6, "x"), /6 players at most/);
});

test("leaving mid-round: the dice go, the turn moves on; the last one in wins", () => {
  const h = started(3);
  const turn = h.state.turn;
  const after = (turn + 1) % 3;
  h.leave(turn);
  assert.deepEqual(last(h, "left"), { t: "left", seat: turn, turn: after });
  assert.equal(h.state.turn, after);
  assert.deepEqual(h.attrs, { players: 2, waiting: false });
  assert.equal(h.act(after, { t: "bid", count: 11, face: 2 })?.refuse, "illegal", "five dice left with the leaver");
  assert.equal(h.act(after, { t: "bid", count: 1, face: 2 }), undefined);
  // A player who is not on turn leaves: the turn stays.
  const third = 3 - turn - after;
  assert.equal(h.state.turn, third);
  h.leave(after);
  assert.equal(h.hands, 1, "one player left: they win");
  assert.deepEqual(last(h, "winner"), { t: "winner", seat: third, match: 1 });
  assert.equal(h.state.playing, false);
  assert.deepEqual(h.pendingTimers(), [], "no start with one player, no turn");
});

test("a bid by a player who left, called false, costs nobody a die", () => {
  const h = started(3, { seed: 3 });
  const bidder = h.state.turn;
  h.act(bidder, { t: "bid", count: 15, face: 6 });
  const caller = h.state.turn;
  h.leave(bidder);
  const before = h.state.players[caller].dice.length;
  h.act(caller, { t: "liar" });
  assert.equal(last(h, "liar").loser, null);
  assert.equal(h.state.players[caller].dice.length, before);
  assert.equal(last(h, "round").turn, caller, "the caller starts the next round");
});

test("a dropped player is played by the timer, shown away, and back gets their dice in the snapshot", () => {
  const { h, bots } = table(dice, { seats: 3, seed: 21 }, [0, 1, 2]);
  bots.run(() => h.state.playing);
  bots.drop(1);
  assert.deepEqual(h.sentTo("table").at(-1), { t: "away", seat: 1, away: true });
  assert.ok(bots.run(() => h.sentTo("table").some((m) => m.auto && m.seat === 1)), "the timer acted for seat 1");
  bots.returnSeat(1);
  assert.deepEqual(h.snapshot(1).dice, h.state.players[1].dice);
  assert.equal(h.snapshot(1).players[1].away, false);
  assert.ok(bots.run(() => h.hands === 1));
  assert.deepEqual(bots.refused, []);
  checkHistory(h);
});

test("save and restore mid-match: the restored table sends exactly what the original does", async () => {
  for (const at of [3, 20, 57]) {
    const { straight, restored, h2 } = await restoreRun("liars-dice", { seats: 4, seed: 8 }, [0, 1, 2, 3], at, 400);
    assert.ok(straight.length > 50);
    assert.deepEqual(restored, straight, `restored at step ${at}`);
    assert.ok(h2.hands >= 1);
  }
});
