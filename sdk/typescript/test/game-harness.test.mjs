// The game-module harness (src/game-harness.ts): the engine's call order,
// timers on a fake clock, save and restore, and each contract check failing
// with a clear error. The games in this file are small on purpose: each test
// builds the one it needs from `base` (the real games are in games/).
import { test } from "node:test";
import assert from "node:assert/strict";
import { GameFault, Harness, SplitMix64 } from "herald-client/game-harness";

/** A game that accepts everything, does nothing, and shows its state. */
const base = {
  created: () => ({ log: [] }),
  sat() {},
  left() {},
  act() {},
  snapshot: (state) => state,
};

/** `base` with `fns` over it. */
const game = (fns) => ({ ...base, ...fns });

/** Asserts `f` throws a GameFault from `fn` whose message matches `re`. */
function faults(f, fn, re) {
  assert.throws(f, (err) => {
    assert.ok(err instanceof GameFault, `not a GameFault: ${err}`);
    assert.equal(err.fn, fn);
    assert.match(err.message, re);
    return true;
  });
}

test("SplitMix64: the reference outputs, and random() from the top 53 bits", () => {
  // Vigna's splitmix64.c from seed 0, and the sequence from seed 1234567
  // that implementations are commonly checked against; the Rust host must
  // give the same.
  assert.equal(new SplitMix64(0).next(), 0xe220a8397b1dcdafn);
  const r = new SplitMix64(1234567);
  assert.deepEqual(
    [1, 2, 3, 4, 5].map(() => r.next()),
    [6457827717110365317n, 3203168211198807973n, 9817491932198370423n, 4593380528125082431n, 16408922859458223821n],
  );
  const one = new SplitMix64(1);
  const first = new SplitMix64(1).next();
  assert.equal(one.random(), Number(first >> 11n) / 2 ** 53);
  // The harness's default seed: the next draws a module gets, for the host to match.
  assert.deepEqual([one.random(), one.random()], [0.7457817572627011, 0.9710027535867962]);
  assert.equal(new SplitMix64(-1n).state, 2n ** 64n - 1n, "seeds are taken mod 2^64");
});

test("ctx.random and ctx.randomInt draw from the seeded generator", () => {
  const g = game({
    act(state, ctx) {
      state.log.push(ctx.random(), ctx.randomInt(6));
    },
  });
  const h = new Harness(g, { seed: 42 });
  h.sit(0, "ann");
  h.act(0, "go");
  const r = new SplitMix64(42);
  assert.deepEqual(h.state.log, [r.random(), Math.floor(r.random() * 6)]);
  faults(() => new Harness(game({ created: (ctx) => ({ n: ctx.randomInt(0) }) })), "ctx.randomInt", /positive integer/);
});

test("sit: a missing or taken seat and canSit's refusal; the table info reaches created", () => {
  let info;
  const g = game({
    created: (ctx, table) => ((info = table), { log: [] }),
    canSit: (state, seat, user, data) => (data?.chips < 10 ? "bring 10 chips" : undefined),
    sat(state, ctx, seat, user, data) {
      state.log.push([seat, user, data]);
    },
  });
  const h = new Harness(g, { seats: 3, timing: "express", params: { stake: 2 }, id: 7 });
  assert.deepEqual(info, { id: 7, seats: 3, timing: "express", params: { stake: 2 } });
  assert.equal(h.sit(0, "ann", { chips: 5 }), "bring 10 chips");
  assert.equal(h.sit(0, "ann", { chips: 10 }), undefined);
  assert.equal(h.sit(0, "bob"), "seat taken");
  assert.equal(h.sit(3, "bob"), "no such seat");
  assert.deepEqual(h.state.log, [[0, "ann", { chips: 10 }]]);
  assert.deepEqual([...h.seats], [[0, "ann"]]);
});

test("sent: routing by recipient; lobby attributes; hands; ctx.unseat calls left, then frees the seat", () => {
  const g = game({
    act(state, ctx, seat, data) {
      ctx.send(seat, { secret: seat });
      ctx.broadcast("all");
      ctx.players("players");
      ctx.watchers("watchers");
      ctx.lobby({ open: data === "open" ? true : null, n: 1 });
      ctx.handEnded();
      if (data === "kick") ctx.unseat(1, "bye");
    },
    left(state, ctx, seat) {
      ctx.broadcast({ left: seat });
    },
  });
  const h = new Harness(g);
  h.sit(0, "ann");
  h.sit(1, "bob");
  h.act(0, "open");
  assert.deepEqual(h.attrs, { open: true, n: 1 });
  assert.deepEqual(h.receivedBy(0), [{ secret: 0 }, "all", "players"]);
  assert.deepEqual(h.receivedBy(1), ["all", "players"]);
  assert.deepEqual(h.receivedBy(null), ["all", "watchers"]);
  assert.deepEqual(h.sentTo({ seat: 0 }), [{ secret: 0 }]);
  assert.deepEqual(h.sentTo("watchers"), ["watchers"]);
  h.clearSent();
  h.act(0, "kick");
  assert.deepEqual(h.attrs, { n: 1 }, "null removes an attribute");
  assert.equal(h.hands, 2);
  assert.deepEqual(h.unseated, [{ seat: 1, reason: "bye" }]);
  assert.deepEqual(h.sentTo("table"), ["all", { left: 1 }], "left ran when its effect was applied, in order");
  assert.deepEqual([...h.seats.keys()], [0]);
  assert.deepEqual(h.act(1, "x"), { refuse: "out_of_turn", message: "not seated" });
});

test("leave, drop and returnSeat call the game in the engine's order; snapshot(null) is a watcher's", () => {
  const g = game({
    left: (state, ctx, seat) => void state.log.push(["left", seat]),
    dropped: (state, ctx, seat) => void state.log.push(["dropped", seat]),
    returned: (state, ctx, seat) => void state.log.push(["returned", seat]),
    snapshot: (state, seat) => ({ seat, log: state.log }),
  });
  const h = new Harness(g);
  h.sit(0, "ann");
  h.drop(0);
  h.drop(0); // already dropped: nothing
  h.returnSeat(0);
  h.returnSeat(0); // not dropped: nothing
  h.leave(0);
  h.leave(0); // free: nothing
  assert.deepEqual(h.state.log, [["dropped", 0], ["returned", 0], ["left", 0]]);
  assert.deepEqual(h.snapshot(null).seat, null);
  assert.throws(() => h.snapshot(0), /seat is free/);
});

test("timers fire in deadline order, ties in the order set, each with the clock at its deadline", () => {
  const g = game({
    created(ctx) {
      ctx.setTimer("a", 100);
      ctx.setTimer("b", 50);
      ctx.setTimer("c", 100); // ties with a, set after it
      ctx.setTimer("gone", 10);
      ctx.cancelTimer("gone");
      ctx.setTimer("moved", 10);
      ctx.setTimer("moved", 300); // replaces the pending one
      return { log: [] };
    },
    timer(state, ctx, key) {
      state.log.push(key);
      if (key === "b") ctx.setTimer("d", 50); // due at 100 too, set last
    },
  });
  const h = new Harness(g);
  assert.deepEqual(h.pendingTimers(), [{ key: "b", in: 50 }, { key: "a", in: 100 }, { key: "c", in: 100 }, { key: "moved", in: 300 }]);
  h.advance(99);
  assert.deepEqual(h.state.log, ["b"]);
  h.advance(1);
  assert.deepEqual(h.state.log, ["b", "a", "c", "d"]);
  assert.equal(h.now, 100);
  assert.equal(h.fireNext(), true);
  assert.equal(h.now, 300, "fireNext moves the clock to the deadline");
  assert.equal(h.fireNext(), false);
});

test("every: ticks interleave with timers by deadline, ties in set order; every(0) stops; periods under 10 ms are raised to 10", () => {
  const g = game({
    created(ctx) {
      ctx.every(50);
      ctx.setTimer("t", 100); // set after the loop was armed for 50
      return { log: [] };
    },
    tick(state, ctx) {
      state.log.push("tick");
      if (state.log.length === 4) ctx.every(0);
    },
    timer(state, ctx, key) {
      state.log.push(key);
    },
  });
  const h = new Harness(g);
  h.advance(100);
  // The tick at 50 re-armed the loop for 100 after "t" was set: "t" first.
  assert.deepEqual(h.state.log, ["tick", "t", "tick"]);
  h.advance(1000);
  assert.deepEqual(h.state.log, ["tick", "t", "tick", "tick"]);
  assert.deepEqual(h.pendingTimers(), []);

  const fast = new Harness(game({ created: (ctx) => (ctx.every(1), { log: [] }), tick: (s) => void s.log.push(1) }));
  fast.advance(30);
  assert.equal(fast.state.log.length, 3);
  faults(() => new Harness(game({ created: (ctx) => (ctx.every(10), {}) })).advance(10), "tick", /no tick function/);
});

test("a refusal, returned or thrown, discards the call's effects and gives its random draws back", () => {
  for (const how of ["return", "throw"]) {
    const g = game({
      act(state, ctx, seat, data) {
        ctx.broadcast("before the refusal");
        ctx.setTimer("t", 10);
        ctx.lobby({ x: 1 });
        ctx.random();
        if (data === "bad") {
          const r = ctx.illegal("no");
          if (how === "throw") throw r;
          return r;
        }
      },
    });
    const h = new Harness(g);
    h.sit(0, "ann");
    assert.deepEqual(h.act(0, "bad"), { refuse: "illegal", message: "no" });
    assert.deepEqual([h.sent, h.pendingTimers(), h.attrs], [[], [], {}]);
    // The next accepted call draws what the refused one drew.
    const g2 = game({ act: (state, ctx) => void state.log.push(ctx.random()) });
    const h2 = new Harness(g2);
    h2.sit(0, "ann");
    h2.act(0, "x");
    const drew = h2.state.log[0];
    const h3 = new Harness(game({ act: (state, ctx, seat, data) => (data === "bad" ? ((ctx.random(), ctx.outOfTurn("wait"))) : void state.log.push(ctx.random())) }));
    h3.sit(0, "ann");
    assert.equal(h3.act(0, "bad").refuse, "out_of_turn");
    h3.act(0, "x");
    assert.equal(h3.state.log[0], drew);
  }
});

test("an act that changes the state and then refuses is a fault", () => {
  const h = new Harness(game({ act: (state, ctx) => (state.log.push(1), ctx.malformed("?")) }));
  h.sit(0, "ann");
  faults(() => h.act(0, 1), "act", /changed the state, then refused/);
  assert.throws(() => h.act(0, 1), /the table failed/, "a failed table takes no more calls");
});

test("state that would not survive JSON is a fault naming the function and the path", () => {
  const epoch = new Date(0); // made here: Date is out of reach during calls
  const cases = [
    [{ created: () => ({ m: new Map() }) }, "created", /state\.m is a Map/],
    [{ created: () => undefined }, "created", /returned nothing/],
    [{ sat: (state) => void (state.x = undefined) }, "sat", /state\.x is undefined/],
    [{ sat: (state) => void (state.log = [NaN]) }, "sat", /state\.log\[0\] is NaN/],
    [{ sat: (state) => void (state.a = state.log) }, "sat", /state\.a is the same object as state\.log/],
    [{ sat: (state) => void (state.log[2] = 1) }, "sat", /state\.log\[0\] is a hole/],
    [{ sat: () => ({ f() {} }) }, "sat", /state\.f is a function/],
    [{ left: (state) => void (state.when = epoch) }, "left", /state\.when is a Date/],
    [{ sat: (state) => void (state.big = 1n) }, "sat", /BigInt/],
  ];
  for (const [fns, fn, re] of cases) {
    faults(() => {
      const h = new Harness(game(fns));
      h.sit(0, "ann");
      h.leave(0);
    }, fn, re);
  }
  faults(() => new Harness(base, { maxState: 5 }), "created", /over maxState/);
});

test("Math.random, Date and performance.now throw during calls, even when the module catches it, and work again after", () => {
  const cases = [
    [() => Math.random(), /Math\.random/],
    [() => Date.now(), /Date/],
    [() => new Date(), /Date/],
    [() => performance.now(), /performance\.now/],
  ];
  for (const [use, re] of cases) {
    const h = new Harness(game({ act: () => void use() }));
    h.sit(0, "ann");
    faults(() => h.act(0, null), "act", re);
    const caught = new Harness(
      game({
        act: () => {
          try {
            use();
          } catch {
            // a module hiding its mistake
          }
        },
      }),
    );
    caught.sit(0, "ann");
    faults(() => caught.act(0, null), "act", /caught/);
  }
  assert.equal(typeof Math.random(), "number");
  assert.equal(typeof Date.now(), "number");
  assert.ok(new Date() instanceof Date);
});

test("messages must be JSON, within maxMessage, and not changed after they are sent", () => {
  const h = () => {
    const h = new Harness(
      game({
        act(state, ctx, seat, data) {
          if (data === "bigint") ctx.broadcast(1n);
          if (data === "undefined") ctx.send(seat, undefined);
          if (data === "big") ctx.broadcast("x".repeat(100));
          if (data === "seat") ctx.send(5, "?");
          if (data === "mutate") {
            const msg = { n: 1 };
            ctx.broadcast(msg);
            msg.n = 2;
          }
        },
      }),
      { maxMessage: 50 },
    );
    h.sit(0, "ann");
    return h;
  };
  faults(() => h().act(0, "bigint"), "ctx.broadcast", /not JSON/);
  faults(() => h().act(0, "undefined"), "ctx.send", /not JSON/);
  faults(() => h().act(0, "big"), "ctx.broadcast", /over maxMessage/);
  faults(() => h().act(0, "seat"), "ctx.send", /not a seat/);
  faults(() => h().act(0, "mutate"), "ctx.broadcast", /changed after it was sent/);
});

test("a ctx used after its call, a throw, a refusal outside act, and a changing snapshot or canSit are faults", () => {
  let kept;
  const late = new Harness(game({ sat: (state, ctx) => void (kept = ctx), act: () => void kept.broadcast("late") }));
  late.sit(0, "ann");
  faults(() => late.act(0, null), "ctx.broadcast", /after the sat call/);

  faults(() => new Harness(game({ created: () => { throw new Error("boom"); } })), "created", /threw Error: boom/);
  faults(() => new Harness(game({ sat: (state, ctx) => ctx.illegal("no") })).sit(0, "ann"), "sat", /only act refuses/);
  const wrong = new Harness(game({ act: () => 1 }));
  wrong.sit(0, "ann");
  faults(() => wrong.act(0, null), "act", /returned 1/);
  faults(() => new Harness(game({ snapshot: (state) => (state.log.push(1), state) })).sit(0, "ann"), "snapshot", /changed the state/);
  faults(() => new Harness(game({ canSit: (state) => void state.log.push(1) })).sit(0, "ann"), "canSit", /changed the state/);
  assert.throws(() => new Harness({ ...base, act: undefined }), /game\.act is undefined/);
});

test("save and restore: the restored table sends what the original would have", () => {
  // A game with everything a save must carry: state, draws, timers, the
  // loop, seats and lobby attributes.
  const g = game({
    created: (ctx) => (ctx.every(30), ctx.setTimer("t", 45), { log: [], n: 0 }),
    sat: (state, ctx, seat) => void ctx.lobby({ players: seat + 1 }),
    act: (state, ctx, seat) => void ctx.broadcast({ seat, draw: ctx.randomInt(1000), n: ++state.n }),
    tick: (state, ctx) => void ctx.broadcast({ tick: ++state.n }),
    timer: (state, ctx, key) => (ctx.broadcast({ timer: key, draw: ctx.random() }), ctx.setTimer(key, 45)),
  });
  const play = (h, from, to) => {
    for (let i = from; i < to; i++) {
      h.act(i % 2, null);
      h.advance(20);
    }
  };
  const straight = new Harness(g, { seed: 9 });
  straight.sit(0, "ann");
  straight.sit(1, "bob");
  play(straight, 0, 5);
  const saved = straight.save();
  const mark = straight.sent.length;
  play(straight, 5, 20);

  const restored = Harness.restore(g, saved);
  assert.deepEqual([...restored.seats], [[0, "ann"], [1, "bob"]]);
  assert.deepEqual(restored.attrs, { players: 2 });
  play(restored, 5, 20);
  assert.deepEqual(restored.sent, straight.sent.slice(mark));
  assert.ok(restored.sent.some((s) => s.msg.timer) && restored.sent.some((s) => s.msg.tick), "timers and ticks went on");
});

test("the package exports the game types and the harness as subpaths", async () => {
  const types = await import("herald-client/game");
  assert.deepEqual(Object.keys(types), [], "game.ts is types only");
  const root = await import("herald-client");
  assert.equal(typeof root.Client, "function", "the root export still works");
});
