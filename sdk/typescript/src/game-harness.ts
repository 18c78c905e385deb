/**
 * A table without a server, for unit tests of a game module in Node
 * (docs/games.md): the TypeScript mirror of the Rust
 * `herald_game::testing::Harness` (crates/game/src/testing.rs).
 *
 * {@link Harness} plays the engine's part the way Herald does: seats, the
 * order of calls, applying a call's effects once it returns (in the order
 * recorded), `unseat` calling `left` before freeing the seat, and a clock
 * that moves only when the test says: {@link Harness.advance} fires timers
 * and the `every` tick in deadline order, ties in the order they were set,
 * each with the clock at its deadline. What the game sent is kept per
 * recipient, as the JSON the clients would get.
 *
 * It also enforces the module contract as strictly as the server does, or
 * more, so that a module passing its tests here does not fail its tables
 * there. A call that breaks it throws a {@link GameFault} naming the
 * function, and the harness refuses any further call (the server fails the
 * table):
 *
 * - the state must survive `JSON.stringify`/`JSON.parse` unchanged after
 *   every call (no `undefined`, functions, `Map`s, class instances, NaN,
 *   shared or cyclic objects), and fit `maxState`;
 * - messages, lobby attributes and snapshots must be JSON and fit
 *   `maxMessage`; a message is serialised when it is sent, and must not be
 *   changed after that within the call;
 * - `Math.random`, `Date` and `performance.now` throw during calls (Herald
 *   has neither clock nor unseeded randomness): `ctx.random()` is the
 *   generator, {@link SplitMix64}, seeded by the `seed` option;
 * - an `act` that refuses must not have changed the state: its recorded
 *   effects are dropped and its random draws are given back;
 * - `canSit` and `snapshot` must not change the state;
 * - a `ctx` is valid only during the call that received it.
 *
 * {@link Harness.save} and {@link Harness.restore} carry a table through
 * JSON text, state, generator, seats, timers and lobby included, to test
 * that a table restored on another node goes on exactly as it would have.
 */

import type { Ctx, Game, Json, Refusal, Seat, TableInfo } from "./game.js";

/** Who a message went to. */
export type To = { readonly seat: Seat } | "table" | "players" | "watchers";

/** One message the game sent: the parsed JSON a client would receive. */
export interface Sent {
  readonly to: To;
  readonly msg: Json;
}

/** What {@link Harness} is created with; every field has a default. */
export interface HarnessOptions {
  /** Number of seats [2]. */
  seats?: number;
  /** The timing profile's name ["normal"]. */
  timing?: string;
  /** The table's other parameters [{}]. */
  params?: { [key: string]: Json };
  /** The table's id [1]. */
  id?: number;
  /** The seed of the table's generator, a 64-bit integer [1]. */
  seed?: number | bigint;
  /** Largest message or snapshot, bytes of JSON [65536, the server's `max_message`]. */
  maxMessage?: number;
  /** Largest state, bytes of JSON [1048576, the server's `max_state`]. */
  maxState?: number;
}

/** The module broke its contract: the server would fail the table. */
export class GameFault extends Error {
  /** The game function that was running (`act`, `timer`, ...), or the ctx method misused. */
  readonly fn: string;

  constructor(fn: string, message: string, options?: { cause?: unknown }) {
    super(`${fn}: ${message}`, options);
    this.name = "GameFault";
    this.fn = fn;
  }
}

const MASK = (1n << 64n) - 1n;

/**
 * The table's random generator: SplitMix64 (Steele, Lea and Flood, 2014),
 * the one the Rust host implements, so a module draws the same numbers in
 * tests and on the server for the same seed. All arithmetic mod 2^64:
 *
 * ```text
 * state += 0x9E3779B97F4A7C15
 * z = state
 * z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
 * z = (z ^ (z >> 27)) * 0x94D049BB133111EB
 * return z ^ (z >> 31)
 * ```
 *
 * `random()` is the top 53 bits of one draw over 2^53, in [0, 1);
 * `randomInt(n)` is `Math.floor(random() * n)`. BigInt keeps the 64-bit
 * products exact (a Number would round them).
 */
export class SplitMix64 {
  /** The generator's whole state: what a saved table keeps. */
  state: bigint;

  constructor(seed: number | bigint) {
    this.state = BigInt.asUintN(64, BigInt(seed));
  }

  /** The next 64-bit output. */
  next(): bigint {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
    return z ^ (z >> 31n);
  }

  /** A number in [0, 1). */
  random(): number {
    return Number(this.next() >> 11n) / 2 ** 53;
  }
}

/** A pending timer: `order` breaks ties between equal deadlines (set first, fired first). */
interface Alarm {
  at: number;
  order: number;
}

/** The `every` loop: one alarm re-armed `ms` after each tick. */
interface Loop extends Alarm {
  ms: number;
}

type Effect =
  | { k: "send"; to: To; text: string; value: unknown; via: string }
  | { k: "setTimer"; key: string; ms: number }
  | { k: "cancelTimer"; key: string }
  | { k: "every"; ms: number }
  | { k: "lobby"; attrs: { [key: string]: Json } }
  | { k: "handEnded" }
  | { k: "unseat"; seat: Seat; reason: string };

/** What {@link Harness.save} writes (JSON text), version 1. */
interface Saved {
  v: 1;
  table: TableInfo;
  state: Json;
  /** The generator's state, 16 hex digits (BigInt is not JSON). */
  rng: string;
  seats: { [seat: string]: string };
  dropped: Seat[];
  /** Pending timers: [key, ms left, order]. */
  timers: [string, number, number][];
  /** The `every` loop: [ms, ms left to the next tick, order], or null. */
  every: [number, number, number] | null;
  /** The last order given out, so timers set after a restore sort after these. */
  order: number;
  attrs: { [key: string]: Json };
}

/** The shortest `every` period; shorter ones are raised to it (docs/games.md). */
const MIN_EVERY_MS = 10;

const REQUIRED = ["created", "sat", "left", "act", "snapshot"] as const;
const OPTIONAL = ["canSit", "dropped", "returned", "timer", "tick"] as const;

/** Internal: how {@link Harness.restore} hands a saved table to the constructor without calling `created`. */
const FROM = Symbol("restore from");
type Internal = HarnessOptions & { [FROM]?: Saved };

/**
 * One table of a game module, driven by hand. `S` is the module's state
 * type; read it with {@link Harness.state}.
 */
export class Harness<S extends Json = Json> {
  /** Everything sent, in order. */
  readonly sent: Sent[] = [];
  /** Lobby attributes as the game last set them. */
  readonly attrs: { [key: string]: Json } = {};
  /** Hands reported finished (`ctx.handEnded()`). */
  hands = 0;
  /** Seats the game stood up, with the reason. */
  readonly unseated: { seat: Seat; reason: string }[] = [];
  /** Seated players: seat → user. */
  readonly seats = new Map<Seat, string>();
  /** Seated players whose connection is lost. */
  readonly dropped = new Set<Seat>();
  /** The table the game was created with. */
  readonly table: TableInfo;

  private readonly game: Game<S>;
  private readonly rng: SplitMix64;
  private readonly maxMessage: number;
  private readonly maxState: number;
  private current!: S;
  private readonly timers = new Map<string, Alarm>();
  private loop: Loop | null = null;
  private order = 0;
  private clock = 0;
  /** Set by the first fault: a failed table takes no more calls. */
  private failed: GameFault | null = null;
  /** The forbidden global a call touched (it may have caught the throw). */
  private forbidden: string | null = null;

  /** Wraps `game` (the module's `game` export) and calls its `created`. */
  constructor(game: Game<S>, options: HarnessOptions = {}) {
    this.game = checkModule(game);
    const from = (options as Internal)[FROM];
    this.table = from?.table ?? {
      id: options.id ?? 1,
      seats: options.seats ?? 2,
      timing: options.timing ?? "normal",
      params: copy(options.params ?? {}, "params") as { [key: string]: Json },
    };
    this.rng = new SplitMix64(options.seed ?? 1);
    this.maxMessage = options.maxMessage ?? 65536;
    this.maxState = options.maxState ?? 1048576;
    if (from) {
      this.load(from);
      return;
    }
    const table = copy(this.table, "table") as unknown as TableInfo;
    const { result, effects } = this.call("created", (ctx) => this.game.created(ctx, table));
    if (result === undefined) throw this.fault("created", "returned nothing: it must return the initial state");
    this.current = result;
    this.settle("created", effects);
  }

  /**
   * A harness going on from `saved` ({@link Harness.save}'s text) with
   * `game`, as a node restoring the table would: the state parsed from JSON,
   * the same generator, seats, lobby attributes and timers (their time left;
   * the clock starts again at 0), and nothing sent yet. `created` is not
   * called. Pass a fresh import of the module (`import(url + "?again")`) to
   * also check it keeps nothing in module-level variables.
   */
  static restore<S extends Json>(game: Game<S>, saved: string, options: Pick<HarnessOptions, "maxMessage" | "maxState"> = {}): Harness<S> {
    const from = JSON.parse(saved) as Saved;
    if (from.v !== 1) throw new Error(`unknown save version ${String(from.v)}`);
    return new Harness(game, { ...options, [FROM]: from } as Internal);
  }

  /** A copy of the current state (changing it changes nothing). */
  get state(): S {
    return JSON.parse(JSON.stringify(this.current)) as S;
  }

  /** Milliseconds since the harness started (or was restored). */
  get now(): number {
    return this.clock;
  }

  /** Pending timers and the `every` loop (key `null`), with the time until each fires, soonest first. */
  pendingTimers(): { key: string | null; in: number }[] {
    return this.alarms().map(([key, a]) => ({ key, in: a.at - this.clock }));
  }

  /**
   * Asks to sit `user` at `seat` with `data`, as the engine would: the seat
   * must exist and be free, then `canSit` may refuse. Returns the refusal,
   * or nothing once `sat` has run.
   */
  sit(seat: Seat, user: string, data: Json = null): string | undefined {
    this.alive();
    if (!Number.isInteger(seat) || seat < 0 || seat >= this.table.seats) return "no such seat";
    if (this.seats.has(seat)) return "seat taken";
    const d = copy(data, "sit data");
    if (this.game.canSit) {
      const canSit = this.game.canSit;
      const before = this.stateText("canSit");
      const { result } = this.call("canSit", () => canSit(this.current, seat, user, d), false);
      if (this.stateText("canSit") !== before) throw this.fault("canSit", "changed the state (it must only answer)");
      if (typeof result === "string") return result;
      if (result !== undefined) throw this.fault("canSit", `returned ${describe(result)}: nothing to allow, a string to refuse`);
    }
    this.seats.set(seat, user);
    this.run("sat", (ctx) => this.game.sat(this.current, ctx, seat, user, d));
    // The engine sends the new player their view next: a snapshot that
    // throws or is not JSON would fail the table there, so here too.
    if (this.seats.has(seat)) this.snapshot(seat);
    return undefined;
  }

  /** The player at `seat` leaves for good: `left`, then the seat is free. Nothing if the seat is free. */
  leave(seat: Seat): void {
    this.alive();
    if (this.seats.has(seat)) this.vacate(seat);
  }

  /** The player at `seat` loses their connection. Nothing if the seat is free or already dropped. */
  drop(seat: Seat): void {
    this.alive();
    if (!this.seats.has(seat) || this.dropped.has(seat)) return;
    this.dropped.add(seat);
    const dropped = this.game.dropped;
    if (dropped) this.run("dropped", (ctx) => dropped(this.current, ctx, seat));
  }

  /** The dropped player at `seat` is back: `returned`, then (as the engine) their snapshot. Nothing if not dropped. */
  returnSeat(seat: Seat): void {
    this.alive();
    if (!this.dropped.delete(seat) || !this.seats.has(seat)) return;
    const returned = this.game.returned;
    if (returned) this.run("returned", (ctx) => returned(this.current, ctx, seat));
    if (this.seats.has(seat)) this.snapshot(seat);
  }

  /**
   * The player at `seat` acts with `data` (a copy reaches the module, as
   * parsed from the wire). Returns the refusal, its effects and random draws
   * discarded, or nothing once the action's effects are applied.
   */
  act(seat: Seat, data: Json = null): Refusal | undefined {
    this.alive();
    if (!this.seats.has(seat)) return { refuse: "out_of_turn", message: "not seated" };
    const d = copy(data, "act data");
    const before = this.stateText("act");
    const rng = this.rng.state;
    const { result, effects } = this.call("act", (ctx) => this.game.act(this.current, ctx, seat, d));
    if (isRefusal(result)) {
      if (this.stateText("act") !== before) {
        throw this.fault("act", `changed the state, then refused (${result.refuse}: ${result.message}): refuse before changing anything`);
      }
      this.rng.state = rng;
      return { refuse: result.refuse, message: result.message };
    }
    if (result !== undefined) throw this.fault("act", `returned ${describe(result)}: nothing to accept, a refusal to refuse`);
    this.settle("act", effects);
    return undefined;
  }

  /** Moves the clock forward by `ms`, firing every timer and tick that falls due, in deadline order. */
  advance(ms: number): void {
    this.alive();
    if (!(ms >= 0)) throw new RangeError(`advance(${ms}): a duration >= 0`);
    const end = this.clock + ms;
    for (let next = this.alarms()[0]; next && next[1].at <= end; next = this.alarms()[0]) {
      this.fire(next[0], next[1]);
    }
    this.clock = end;
  }

  /** Fires the next pending timer or tick, whenever it is due; false if there is none. */
  fireNext(): boolean {
    this.alive();
    const next = this.alarms()[0];
    if (!next) return false;
    this.fire(next[0], next[1]);
    return true;
  }

  /** What `seat` (a watcher for `null`) would be sent on sitting, watching or returning. */
  snapshot(seat: Seat | null): Json {
    this.alive();
    if (seat !== null && !this.seats.has(seat)) throw new Error(`snapshot(${seat}): the seat is free (the engine asks only for seated players and watchers)`);
    const before = this.stateText("snapshot");
    const { result } = this.call("snapshot", () => this.game.snapshot(this.current, seat), false);
    if (this.stateText("snapshot") !== before) throw this.fault("snapshot", "changed the state (it must only read it)");
    return JSON.parse(this.message("snapshot", result)) as Json;
  }

  /** Messages sent to exactly this recipient. */
  sentTo(to: To): Json[] {
    return this.sent.filter((s) => sameTo(s.to, to)).map((s) => s.msg);
  }

  /**
   * Messages the player at `seat` would have received (its own, the
   * table's and the players'); for `null`, what a watcher would have (the
   * table's and the watchers').
   */
  receivedBy(seat: Seat | null): Json[] {
    return this.sent
      .filter(({ to }) => to === "table" || (seat === null ? to === "watchers" : to === "players" || (typeof to === "object" && to.seat === seat)))
      .map((s) => s.msg);
  }

  /** Forgets the messages recorded so far. */
  clearSent(): void {
    this.sent.length = 0;
  }

  /**
   * The table as a node would save it, in JSON text: the game's part (state,
   * generator, timers with their time left, the `every` loop) and the
   * engine's (table, seats, lobby attributes). {@link Harness.restore} reads it.
   */
  save(): string {
    this.alive();
    const left = (a: Alarm) => a.at - this.clock;
    const saved: Saved = {
      v: 1,
      table: this.table,
      state: this.current,
      rng: this.rng.state.toString(16).padStart(16, "0"),
      seats: Object.fromEntries([...this.seats].map(([s, u]) => [String(s), u])),
      dropped: [...this.dropped],
      timers: [...this.timers].map(([key, a]): [string, number, number] => [key, left(a), a.order]),
      every: this.loop && [this.loop.ms, left(this.loop), this.loop.order],
      order: this.order,
      attrs: this.attrs,
    };
    return JSON.stringify(saved);
  }

  private load(from: Saved): void {
    this.current = from.state as S;
    this.rng.state = BigInt(`0x${from.rng}`);
    for (const [s, u] of Object.entries(from.seats)) this.seats.set(Number(s), u);
    for (const s of from.dropped) this.dropped.add(s);
    for (const [key, left, order] of from.timers) this.timers.set(key, { at: left, order });
    this.loop = from.every && { ms: from.every[0], at: from.every[1], order: from.every[2] };
    this.order = from.order;
    Object.assign(this.attrs, from.attrs);
  }

  /** Pending alarms, soonest first, ties in set order; the loop's key is `null`. */
  private alarms(): [string | null, Alarm][] {
    const all: [string | null, Alarm][] = [...this.timers];
    if (this.loop) all.push([null, this.loop]);
    return all.sort((a, b) => a[1].at - b[1].at || a[1].order - b[1].order);
  }

  private fire(key: string | null, alarm: Alarm): void {
    this.clock = Math.max(this.clock, alarm.at);
    if (key === null) {
      // Re-armed before the tick runs, so that an `every` call in `tick`
      // (`every(0)` to stop) replaces it.
      const loop = this.loop as Loop;
      loop.at += loop.ms;
      loop.order = ++this.order;
      const tick = this.game.tick;
      if (!tick) throw this.fault("tick", "ctx.every() started a loop but the game has no tick function");
      this.run("tick", (ctx) => tick(this.current, ctx));
    } else {
      this.timers.delete(key);
      const timer = this.game.timer;
      if (!timer) throw this.fault("timer", `timer "${key}" fired but the game has no timer function`);
      this.run("timer", (ctx) => timer(this.current, ctx, key));
    }
  }

  private vacate(seat: Seat): void {
    this.run("left", (ctx) => this.game.left(this.current, ctx, seat));
    this.seats.delete(seat);
    this.dropped.delete(seat);
  }

  /** Calls one of the functions that may return a new state, then applies its effects. */
  private run(fn: string, f: (ctx: Ctx) => S | void): void {
    const { result, effects } = this.call(fn, f);
    if (result !== undefined) this.current = result;
    this.settle(fn, effects);
  }

  /** Checks the state after `fn`, then applies its effects in order. */
  private settle(fn: string, effects: Effect[]): void {
    const text = this.stateText(fn);
    if (text.length > this.maxState) throw this.fault(fn, `the state is ${text.length} bytes of JSON, over maxState (${this.maxState})`);
    for (const e of effects) this.apply(e);
  }

  private apply(e: Effect): void {
    switch (e.k) {
      case "send":
        this.sent.push({ to: e.to, msg: JSON.parse(e.text) as Json });
        break;
      case "setTimer":
        this.timers.set(e.key, { at: this.clock + e.ms, order: ++this.order });
        break;
      case "cancelTimer":
        this.timers.delete(e.key);
        break;
      case "every":
        this.loop = e.ms === 0 ? null : { ms: e.ms, at: this.clock + e.ms, order: ++this.order };
        break;
      case "lobby":
        for (const [k, v] of Object.entries(e.attrs)) {
          if (v === null) delete this.attrs[k];
          else this.attrs[k] = v;
        }
        break;
      case "handEnded":
        this.hands += 1;
        break;
      case "unseat":
        if (this.seats.has(e.seat)) {
          this.unseated.push({ seat: e.seat, reason: e.reason });
          this.vacate(e.seat);
        }
        break;
    }
  }

  /**
   * Runs one call of the module with a fresh ctx (when `withCtx`) and the
   * forbidden globals replaced; a throw, a refusal outside `act` or a
   * touched forbidden global is a fault.
   */
  private call<R>(fn: string, f: (ctx: Ctx) => R, withCtx = true): { result: R; effects: Effect[] } {
    const effects: Effect[] = [];
    const live = { on: true };
    const ctx = withCtx ? this.makeCtx(fn, effects, live) : (undefined as unknown as Ctx);
    this.forbidden = null;
    const restore = this.forbid();
    let result: R;
    try {
      result = f(ctx);
    } catch (err) {
      if (err instanceof GameFault) throw this.fail(err);
      if (this.forbidden !== null) throw this.fault(fn, `used ${this.forbidden}`, err);
      if (fn === "act" && isRefusal(err)) return { result: err as R, effects };
      throw this.fault(fn, `threw ${err instanceof Error ? (err.stack ?? err.message) : describe(err)}`, err);
    } finally {
      restore();
      live.on = false;
    }
    // A fault raised by a ctx method stands even if the module caught it.
    if (this.failed) throw this.failed;
    if (this.forbidden !== null) throw this.fault(fn, `used ${this.forbidden} (and caught the error)`);
    for (const e of effects) {
      // Serialised when sent; the server may serialise then or when the call
      // returns, so a message changed in between is a bug in the module.
      if (e.k === "send" && safeStringify(e.value) !== e.text) throw this.fault(e.via, "the message was changed after it was sent, in the same call: send a copy");
    }
    if (result instanceof Promise) throw this.fault(fn, "returned a Promise: game functions are synchronous");
    if (isRefusal(result) && fn !== "act") throw this.fault(fn, `returned a refusal (${result.refuse}); only act refuses`);
    return { result, effects };
  }

  private makeCtx(fn: string, effects: Effect[], live: { on: boolean }): Ctx {
    const use = (method: string) => {
      if (!live.on) throw this.fault(`ctx.${method}`, `called after the ${fn} call that received this ctx returned (a ctx is valid only during its call)`);
    };
    const seat = (method: string, s: unknown): Seat => {
      if (!Number.isInteger(s) || (s as number) < 0 || (s as number) >= this.table.seats) throw this.fault(`ctx.${method}`, `${describe(s)} is not a seat of this table (0 to ${this.table.seats - 1})`);
      return s as Seat;
    };
    const ms = (method: string, v: unknown): number => {
      if (typeof v !== "number" || !(v >= 0) || v === Infinity) throw this.fault(`ctx.${method}`, `${describe(v)} is not a duration in ms (a finite number >= 0)`);
      return v;
    };
    const key = (method: string, k: unknown): string => {
      if (typeof k !== "string") throw this.fault(`ctx.${method}`, `timer keys are strings, not ${describe(k)}`);
      return k;
    };
    const send = (method: string, to: To, msg: unknown) => {
      use(method);
      effects.push({ k: "send", to, text: this.message(`ctx.${method}`, msg), value: msg, via: `ctx.${method}` });
    };
    const refusal = (refuse: Refusal["refuse"]) => (message: string): Refusal => ({ refuse, message: String(message) });
    return {
      send: (s, msg) => send("send", { seat: seat("send", s) }, msg),
      broadcast: (msg) => send("broadcast", "table", msg),
      players: (msg) => send("players", "players", msg),
      watchers: (msg) => send("watchers", "watchers", msg),
      setTimer: (k, t) => {
        use("setTimer");
        effects.push({ k: "setTimer", key: key("setTimer", k), ms: ms("setTimer", t) });
      },
      cancelTimer: (k) => {
        use("cancelTimer");
        effects.push({ k: "cancelTimer", key: key("cancelTimer", k) });
      },
      every: (t) => {
        use("every");
        const v = ms("every", t);
        effects.push({ k: "every", ms: v === 0 ? 0 : Math.max(v, MIN_EVERY_MS) });
      },
      lobby: (attrs) => {
        use("lobby");
        if (attrs === null || typeof attrs !== "object" || Array.isArray(attrs)) throw this.fault("ctx.lobby", `takes an object of attributes, not ${describe(attrs)}`);
        effects.push({ k: "lobby", attrs: JSON.parse(this.message("ctx.lobby", attrs)) as { [key: string]: Json } });
      },
      handEnded: () => {
        use("handEnded");
        effects.push({ k: "handEnded" });
      },
      unseat: (s, reason) => {
        use("unseat");
        effects.push({ k: "unseat", seat: seat("unseat", s), reason: String(reason) });
      },
      random: () => {
        use("random");
        return this.rng.random();
      },
      randomInt: (n) => {
        use("randomInt");
        if (!Number.isSafeInteger(n) || n < 1) throw this.fault("ctx.randomInt", `n must be a positive integer, not ${describe(n)}`);
        return Math.floor(this.rng.random() * n);
      },
      outOfTurn: refusal("out_of_turn"),
      illegal: refusal("illegal"),
      malformed: refusal("malformed"),
    };
  }

  /** Replaces the globals a module must not use; returns the undo. */
  private forbid(): () => void {
    const no = (what: string) => () => {
      this.forbidden = what;
      throw new Error(`${what} is not available to a game module: use ctx.random() for randomness and timers for time`);
    };
    const noDate = no("Date");
    const perf = globalThis.performance as { now: () => number } | undefined;
    const undo = [
      patch(Math, "random", no("Math.random")),
      // A Proxy so that `new Date()`, `Date()` and `Date.anything()` all
      // fail clearly; its target is a plain function, as only those construct.
      patch(globalThis, "Date", new Proxy(function () {}, { apply: noDate, construct: noDate, get: () => noDate })),
      perf ? patch(perf, "now", no("performance.now")) : () => {},
    ];
    return () => undo.forEach((u) => u());
  }

  /** The JSON text of a message, or a fault naming `fn` if it is not JSON or too large. */
  private message(fn: string, msg: unknown): string {
    const text = safeStringify(msg);
    if (text === undefined) throw this.fault(fn, `${describe(msg)} is not JSON`);
    const bytes = new TextEncoder().encode(text).length;
    if (bytes > this.maxMessage) throw this.fault(fn, `the message is ${bytes} bytes of JSON, over maxMessage (${this.maxMessage})`);
    return text;
  }

  /** The state's JSON text, once it is checked to come back unchanged from JSON. */
  private stateText(fn: string): string {
    const problem = jsonProblem(this.current, "state", new Map());
    if (problem !== undefined) throw this.fault(fn, `the state would not survive JSON.stringify/JSON.parse: ${problem}`);
    return JSON.stringify(this.current);
  }

  private alive(): void {
    if (this.failed) throw new Error(`the table failed (${this.failed.message}); make a new Harness`);
  }

  private fault(fn: string, message: string, cause?: unknown): GameFault {
    return this.fail(new GameFault(fn, message, cause === undefined ? undefined : { cause }));
  }

  private fail(f: GameFault): GameFault {
    this.failed ??= f;
    return f;
  }
}

/** Checks a module's `game` export as the server does when it loads the module. */
function checkModule<S extends Json>(game: Game<S>): Game<S> {
  if (game === null || typeof game !== "object") throw new TypeError(`the module's game export is ${describe(game)}, not an object of functions`);
  const fns = game as unknown as Record<string, unknown>;
  for (const f of REQUIRED) {
    if (typeof fns[f] !== "function") throw new TypeError(`game.${f} is ${describe(fns[f])}: a game module must export a game with ${REQUIRED.join(", ")}`);
  }
  for (const f of OPTIONAL) {
    if (fns[f] !== undefined && typeof fns[f] !== "function") throw new TypeError(`game.${f} is ${describe(fns[f])}, not a function`);
  }
  return game;
}

function isRefusal(v: unknown): v is Refusal {
  if (v === null || typeof v !== "object") return false;
  const r = v as { refuse?: unknown; message?: unknown };
  return (r.refuse === "out_of_turn" || r.refuse === "illegal" || r.refuse === "malformed") && typeof r.message === "string";
}

function sameTo(a: To, b: To): boolean {
  return typeof a === "object" && typeof b === "object" ? a.seat === b.seat : a === b;
}

/** A copy of a test's value through JSON, as the module would get it from the wire. */
function copy(v: unknown, what: string): Json {
  const text = safeStringify(v);
  if (text === undefined) throw new TypeError(`${what}: ${describe(v)} is not JSON`);
  return JSON.parse(text) as Json;
}

/** `JSON.stringify`, or undefined for what it cannot write (cycles, BigInt, a bare function or undefined). */
function safeStringify(v: unknown): string | undefined {
  try {
    return JSON.stringify(v);
  } catch {
    return undefined;
  }
}

/**
 * Why `v` would not come back equal from `JSON.parse(JSON.stringify(v))`,
 * naming the path; nothing if it would. `seen` maps each object met to its
 * path: an object reached twice would come back as two.
 */
function jsonProblem(v: unknown, path: string, seen: Map<object, string>): string | undefined {
  switch (typeof v) {
    case "string":
    case "boolean":
      return undefined;
    case "number":
      return Number.isFinite(v) ? undefined : `${path} is ${v} (JSON has no such number)`;
    case "undefined":
    case "function":
    case "symbol":
    case "bigint":
      return `${path} is ${describe(v)}`;
  }
  if (v === null) return undefined;
  const o = v as object;
  const first = seen.get(o);
  if (first !== undefined) return `${path} is the same object as ${first} (JSON would make two, or fail on a cycle)`;
  seen.set(o, path);
  if (Object.getOwnPropertySymbols(o).length > 0) return `${path} has symbol keys`;
  const names = Object.getOwnPropertyNames(o);
  if (Array.isArray(o)) {
    for (let i = 0; i < o.length; i++) {
      if (!(i in o)) return `${path}[${i}] is a hole`;
      const p = jsonProblem(o[i], `${path}[${i}]`, seen);
      if (p !== undefined) return p;
    }
    if (names.length !== o.length + 1) return `${path} is an array with named properties`;
    return undefined;
  }
  const proto = Object.getPrototypeOf(o);
  if (proto !== Object.prototype && proto !== null) return `${path} is ${describe(o)}, not a plain object`;
  for (const name of names) {
    const d = Object.getOwnPropertyDescriptor(o, name) as PropertyDescriptor;
    const at = /^[A-Za-z_$][\w$]*$/.test(name) ? `${path}.${name}` : `${path}[${JSON.stringify(name)}]`;
    if (!d.enumerable) return `${at} is not enumerable`;
    if (d.get || d.set) return `${at} is a getter or setter`;
    const p = jsonProblem(d.value, at, seen);
    if (p !== undefined) return p;
  }
  return undefined;
}

/** A short description of a value for error messages. */
function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "function") return "a function";
  if (typeof v === "bigint") return `a BigInt (${v}n)`;
  if (typeof v === "symbol") return "a symbol";
  if (typeof v === "object") {
    const name = (Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null)?.constructor?.name;
    return name && name !== "Object" ? `a ${name}` : "an object";
  }
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

/** Sets `obj[key]` to `value`; returns the undo (an own property put back, an inherited one uncovered). */
function patch<T extends object>(obj: T, key: string, value: unknown): () => void {
  const own = Object.getOwnPropertyDescriptor(obj, key);
  Object.defineProperty(obj, key, { value, writable: true, configurable: true, enumerable: own?.enumerable ?? false });
  return () => {
    if (own) Object.defineProperty(obj, key, own);
    else delete (obj as Record<string, unknown>)[key];
  };
}
