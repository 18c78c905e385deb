/**
 * Types for writing a Herald game module in TypeScript (docs/games.md).
 *
 * A game module is a plain ES module that Herald runs in an embedded
 * JavaScript engine (QuickJS, decision 0014), one table at a time: it
 * exports a {@link Game} as `game` (and, for `herald bench bots --game`, a
 * {@link Bot} as `bot`). Compile the TypeScript with esbuild or tsc to one
 * ES module file (no imports at run time: bundle what you use) and name it
 * in the server's config:
 *
 * ```toml
 * [[games]]
 * name = "dice"
 * module = "games/dice.js"
 * ```
 *
 * Rules never do I/O and never read a clock or `Math.random`: everything
 * they do goes through {@link Ctx}, and everything they remember lives in
 * the table's `state`, a JSON value that Herald saves and, in a cluster,
 * restores on another node when the table's node dies (decision 0009).
 * Only types are exported here: nothing of this file runs inside Herald.
 */

/** A seat number, 0 to `seats - 1`. */
export type Seat = number;

/** Any value `JSON.stringify` writes and `JSON.parse` reads back unchanged. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** What a table was created with. */
export interface TableInfo {
  /** The table's id. */
  readonly id: number;
  /** Number of seats. */
  readonly seats: number;
  /** The timing profile's name (`normal`, `express`, ...; the game decides what it means). */
  readonly timing: string;
  /** Every other parameter from the config or `POST /api/tables` (a JSON object). */
  readonly params: { readonly [key: string]: Json };
}

/**
 * Why an action is refused: the player gets error 118 with the message and
 * nothing changes. Return one from {@link Game.act} (or throw it).
 */
export interface Refusal {
  readonly refuse: "out_of_turn" | "illegal" | "malformed";
  readonly message: string;
}

/**
 * The effects of one call, applied by Herald in the order recorded once the
 * call returns. Valid only during the call that received it.
 */
export interface Ctx {
  /** Sends `msg` (JSON) to the player at `seat` only: private information. */
  send(seat: Seat, msg: Json): void;
  /** Sends `msg` to every player and watcher. */
  broadcast(msg: Json): void;
  /** Sends `msg` to every seated player, not to watchers. */
  players(msg: Json): void;
  /** Sends `msg` to watchers only. */
  watchers(msg: Json): void;
  /**
   * Calls {@link Game.timer} with `key` after `ms` milliseconds of the
   * table's clock, replacing a pending timer with the same key.
   */
  setTimer(key: string, ms: number): void;
  /** Cancels the pending timer `key` (nothing if none). */
  cancelTimer(key: string): void;
  /**
   * Calls {@link Game.tick} every `ms` milliseconds (at least 10) until
   * `every(0)`: the loop of a real-time game.
   */
  every(ms: number): void;
  /** Sets the table's lobby attributes given (`null` removes one). */
  lobby(attrs: { [key: string]: Json }): void;
  /** A hand (round, match) finished: counted in `/metrics`. */
  handEnded(): void;
  /** Stands the player at `seat` up, telling them `reason` (`unseat`, code 117). */
  unseat(seat: Seat, reason: string): void;
  /**
   * A number in [0, 1) from the table's own generator: seeded unpredictably
   * when the table is created, saved with the table, so a table restored on
   * another node draws what this one would have. `Math.random` is absent.
   */
  random(): number;
  /** An integer in [0, n) from {@link Ctx.random}'s generator. */
  randomInt(n: number): number;
  /** Refusal helpers: `return ctx.illegal("bid higher")` from `act`. */
  outOfTurn(message: string): Refusal;
  illegal(message: string): Refusal;
  malformed(message: string): Refusal;
}

/**
 * A game's rules: the mirror of the Rust `herald_game::Game` trait. Herald
 * calls one function at a time per table, never concurrently. `state` is the
 * value {@link Game.created} returned; change it in place, or return a new
 * state from any function marked so. Anything a function throws, a call
 * that runs past its CPU budget or allocates past its memory cap, and a
 * return value of the wrong type close the table with code 100 (`unseat`
 * 100 to every player), counted in `/metrics`; other tables go on.
 */
export interface Game<S extends Json = Json> {
  /**
   * Called once when the table is created: returns its initial state.
   * Throw to refuse `table.params` (`POST /api/tables` answers 400 with
   * the message).
   */
  created(ctx: Ctx, table: TableInfo): S;
  /**
   * May `user` sit at the free seat `seat`, with `data` (the `sit`
   * command's data as JSON, `null` if none)? Return nothing to allow, a
   * string to refuse with that reason (error 116). Must not change state.
   */
  canSit?(state: S, seat: Seat, user: string, data: Json): string | void;
  /** The player now holds `seat`. */
  sat(state: S, ctx: Ctx, seat: Seat, user: string, data: Json): S | void;
  /** The player at `seat` leaves for good; the seat is free once this returns. */
  left(state: S, ctx: Ctx, seat: Seat): S | void;
  /** The player at `seat` lost their connection (the seat stays theirs for the grace period). */
  dropped?(state: S, ctx: Ctx, seat: Seat): S | void;
  /** The dropped player at `seat` is back; Herald sends them `snapshot(state, seat)` next. */
  returned?(state: S, ctx: Ctx, seat: Seat): S | void;
  /**
   * The player at `seat` acts with `data` (the `act` command's data, parsed
   * JSON; an action that is not JSON is refused as malformed before this is
   * called). Return nothing to accept, a {@link Refusal} to refuse.
   */
  act(state: S, ctx: Ctx, seat: Seat, data: Json): Refusal | void;
  /** The timer `key` fired. */
  timer?(state: S, ctx: Ctx, key: string): S | void;
  /** One step of the loop started with {@link Ctx.every}. */
  tick?(state: S, ctx: Ctx): S | void;
  /** What the table looks like to `seat`, or to a watcher (`null`). */
  snapshot(state: S, seat: Seat | null): Json;
}

/**
 * A bot for `herald bench bots --game NAME` and `herald game test`: one per
 * seated player, fed what that player receives.
 */
export interface Bot<M extends Json = Json> {
  /** The bot's memory for a new player at `seat`. */
  init(seat: Seat): M;
  /**
   * The player received `msg`: its seat's snapshot (`kind` "snapshot") or a
   * `game` push (`kind` "game"). Return the action to send, or nothing.
   */
  on(memory: M, kind: "snapshot" | "game", msg: Json): Json | void;
}
