// rps.ts, the module port of crates/game/examples/rps.rs: the Rust example's
// own match with the same messages, secrecy of picks, refusals, the pick
// timer, bots, leaving, dropping and save/restore.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Harness } from "herald-client/game-harness";
import { load, restoreRun, table } from "./bots.mjs";

const rps = await load("rps");

function two() {
  const h = new Harness(rps.game);
  assert.equal(h.sit(0, "ann"), undefined);
  assert.equal(h.sit(1, "bob"), undefined);
  return h;
}

test("the Rust example's match, message for message: ann wins two rounds to one", () => {
  const h = two();
  assert.equal(h.act(0, "rock"), undefined);
  assert.equal(h.act(0, "paper")?.refuse, "out_of_turn", "one pick per round");
  h.act(1, "scissors"); // ann 1-0
  h.act(1, "paper");
  h.advance(5000); // ann too slow: bob 1-1
  h.act(0, "paper");
  h.act(1, "rock"); // ann 2-1
  assert.equal(h.hands, 1);
  assert.deepEqual(h.sent, [
    { to: "table", msg: { t: "round", score: [0, 0] } },
    { to: { seat: 0 }, msg: { t: "picked", pick: "rock" } },
    { to: { seat: 1 }, msg: { t: "picked", pick: "scissors" } },
    { to: "table", msg: { t: "reveal", picks: ["rock", "scissors"], w: 0 } },
    { to: "table", msg: { t: "round", score: [1, 0] } },
    { to: { seat: 1 }, msg: { t: "picked", pick: "paper" } },
    { to: "table", msg: { t: "reveal", picks: ["none", "paper"], w: 1 } },
    { to: "table", msg: { t: "round", score: [1, 1] } },
    { to: { seat: 0 }, msg: { t: "picked", pick: "paper" } },
    { to: { seat: 1 }, msg: { t: "picked", pick: "rock" } },
    { to: "table", msg: { t: "reveal", picks: ["paper", "rock"], w: 0 } },
    { to: "table", msg: { t: "match", winner: 0 } },
    { to: "table", msg: { t: "round", score: [0, 0] } },
  ]);
  assert.equal(h.act(0, "x")?.refuse, "malformed");
  assert.deepEqual(h.snapshot(null), { t: "state", score: [0, 0] });
});

test("a pick reaches no one but its player until the reveal", () => {
  const h = two();
  h.act(0, "scissors");
  for (const who of [1, null]) {
    assert.ok(!JSON.stringify(h.receivedBy(who)).includes("scissors"), `${who ?? "watchers"} saw the pick`);
    assert.ok(!JSON.stringify(h.snapshot(who)).includes("scissors"));
  }
  h.act(1, "rock");
  assert.ok(JSON.stringify(h.receivedBy(null)).includes("scissors"), "revealed to all");
});

test("refusals: malformed data, picking alone or twice, a third seat", () => {
  const h = new Harness(rps.game, { seats: 3 });
  h.sit(0, "ann");
  for (const bad of [null, 1, "Rock", { pick: "rock" }, ["rock"]]) {
    assert.deepEqual(h.act(0, bad), { refuse: "malformed", message: "rock, paper or scissors" });
  }
  assert.deepEqual(h.act(0, "rock"), { refuse: "out_of_turn", message: "wait for the next round" });
  assert.equal(h.sit(2, "cy"), "two seats");
  assert.deepEqual(h.attrs, { waiting: true });
  h.sit(1, "bob");
  assert.deepEqual(h.attrs, { waiting: false });
  h.act(0, "rock");
  assert.equal(h.act(0, "rock").refuse, "out_of_turn");
});

test("the pick timer: nobody picks, nobody scores; a lone picker wins the match in two timeouts", () => {
  const h = two();
  h.advance(5000);
  assert.deepEqual(h.sentTo("table").slice(-2), [{ t: "reveal", picks: ["none", "none"], w: null }, { t: "round", score: [0, 0] }]);
  h.act(1, "paper");
  h.advance(5000);
  h.act(1, "rock");
  h.advance(4999);
  assert.equal(h.hands, 0);
  h.advance(1);
  assert.equal(h.hands, 1);
  assert.deepEqual(h.sentTo("table").at(-2), { t: "match", winner: 1 });
});

test("bots play a match to the end; they pick on the snapshot, refused only when no round was open", () => {
  const { h, bots } = table(rps, {}, [0, 1]);
  assert.ok(bots.run(() => h.hands === 3), "three matches");
  assert.ok(bots.refused.every((r) => r.refuse === "out_of_turn" && r.seat === 0), JSON.stringify(bots.refused));
  assert.equal(bots.refused.length, 1, "seat 0 picked on its snapshot before seat 1 sat");
});

test("leaving mid-round resets the score and stops the round; a new player starts a new one", () => {
  const h = two();
  h.act(0, "rock");
  h.act(1, "scissors");
  h.leave(1);
  assert.deepEqual(h.pendingTimers(), []);
  assert.deepEqual(h.attrs, { waiting: true });
  h.sit(1, "cy");
  assert.deepEqual(h.sentTo("table").at(-1), { t: "round", score: [0, 0] });
});

test("a dropped player loses on time; back, they get the score", () => {
  const { h, bots } = table(rps, {}, [0, 1]);
  bots.drop(1);
  assert.ok(bots.run(() => h.hands === 1));
  assert.deepEqual(h.sentTo("table").filter((m) => m.t === "match"), [{ t: "match", winner: 0 }]);
  bots.returnSeat(1);
  assert.deepEqual(h.snapshot(1), { t: "state", score: [0, 0] });
});

test("save and restore mid-match: the restored table sends exactly what the original does", async () => {
  for (const at of [1, 4, 9]) {
    const { straight, restored } = await restoreRun("rps", {}, [0, 1], at, 40);
    assert.ok(straight.length > 10);
    assert.deepEqual(restored, straight, `restored at step ${at}`);
  }
});
