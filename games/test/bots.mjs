// Shared by the games' tests: a module's bots playing on the harness, fed
// the way the engine feeds players (crates/game/src/table.rs, "Order towards
// a client"): whoever sits or returns first gets its snapshot, taken after
// the game handled the event, and then only what the table sends after it;
// a dropped player gets nothing until it returns. Bots act at once on what
// they read (clients with no latency). Play goes in steps: a step delivers
// what every bot had to read when it began (what their actions cause waits
// for the next step, so a match of bots that never wait still yields), or,
// when nothing is waiting, fires the next timer or tick.
import assert from "node:assert/strict";
import { Harness } from "herald-client/game-harness";

/** The module at `dist/<name>.js`; `fresh` imports a new instance (new module-level variables). */
export async function load(name, fresh = false) {
  const url = new URL(`../dist/${name}.js`, import.meta.url);
  if (fresh) url.search = `?fresh=${Math.random()}`;
  return import(url.href);
}

/** Does a message sent `to` reach the player at `seat`? */
const reaches = (to, seat) => to === "table" || to === "players" || (typeof to === "object" && to.seat === seat);

export class Bots {
  /** Bots of `mod` (a loaded module) on harness `h`. */
  constructor(h, mod) {
    this.h = h;
    this.bot = mod.bot;
    /** seat → { memory, inbox: messages not yet read, away } */
    this.players = new Map();
    /** Index in h.sent of the first message not yet put in inboxes. */
    this.read = 0;
    this.actions = 0;
    /** Refused actions: { seat, data, refuse, message }. */
    this.refused = [];
  }

  /**
   * A driver for `h`, restored from a save of this one's harness, going on
   * with copies of the bots' memories and unread messages: the players are
   * other processes, untouched by the server's fail-over.
   */
  resume(h, mod) {
    this.collect();
    const b = new Bots(h, mod);
    for (const [seat, p] of this.players) b.players.set(seat, structuredClone(p));
    return b;
  }

  sit(seat, user = `bot${seat}`) {
    this.collect();
    const refused = this.h.sit(seat, user);
    assert.equal(refused, undefined, `seat ${seat}: ${refused}`);
    this.collect(); // what sat sent reaches the others, not the new player
    this.players.set(seat, { memory: this.bot.init(seat), inbox: [], away: false });
    this.feed(seat, "snapshot", this.h.snapshot(seat));
  }

  leave(seat) {
    this.collect();
    this.h.leave(seat);
    this.players.delete(seat);
  }

  drop(seat) {
    this.collect();
    this.players.get(seat).away = true;
    this.h.drop(seat);
  }

  returnSeat(seat) {
    this.h.returnSeat(seat);
    this.collect(); // still away: what returned sent is covered by the snapshot
    const p = this.players.get(seat);
    Object.assign(p, { away: false, inbox: [] });
    this.feed(seat, "snapshot", this.h.snapshot(seat));
  }

  /** Puts what the table sent since the last time in the inboxes of the bots it reaches. */
  collect() {
    for (const seat of this.players.keys()) if (!this.h.seats.has(seat)) this.players.delete(seat); // stood up by the game
    for (; this.read < this.h.sent.length; this.read++) {
      const { to, msg } = this.h.sent[this.read];
      for (const [seat, p] of this.players) if (!p.away && reaches(to, seat)) p.inbox.push(msg);
    }
  }

  /** One step: every bot reads what it had waiting, or else the next timer fires. False when nothing is left to do. */
  step() {
    this.collect();
    const waiting = [...this.players].filter(([, p]) => p.inbox.length > 0);
    if (waiting.length === 0) return this.h.fireNext();
    for (const [seat, p] of waiting) {
      for (const msg of p.inbox.splice(0)) if (this.players.has(seat) && this.h.seats.has(seat)) this.feed(seat, "game", msg);
    }
    return true;
  }

  /** Steps until `done()` (then true) or `limit` steps or nothing left to do (then `done()`). */
  run(done, limit = 100_000) {
    for (let i = 0; i < limit; i++) {
      if (done()) return true;
      if (!this.step()) break;
    }
    return done();
  }

  feed(seat, kind, msg) {
    const data = this.bot.on(this.players.get(seat).memory, kind, msg);
    if (data === undefined) return;
    this.actions += 1;
    const r = this.h.act(seat, data);
    if (r) this.refused.push({ seat, data, ...r });
  }
}

/** A new harness for `mod` and bots in `seats`. */
export function table(mod, options, seats) {
  const h = new Harness(mod.game, options);
  const bots = new Bots(h, mod);
  for (const seat of seats) bots.sit(seat);
  return { h, bots };
}

/**
 * Plays `steps` bot steps, saves at `at`, and plays the rest twice: on, and
 * on a harness restored from the save with a fresh import of the module.
 * Returns both runs' messages after the save (they must be equal).
 */
export async function restoreRun(name, options, seats, at, steps) {
  const mod = await load(name);
  const { h, bots } = table(mod, options, seats);
  for (let i = 0; i < at; i++) bots.step();
  const saved = h.save();
  const mark = h.sent.length;
  const fresh = await load(name, true);
  const h2 = Harness.restore(fresh.game, saved);
  const bots2 = bots.resume(h2, fresh);
  for (let i = at; i < steps; i++) bots.step();
  for (let i = at; i < steps; i++) bots2.step();
  return { straight: h.sent.slice(mark), restored: h2.sent, h, h2 };
}
