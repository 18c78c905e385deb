/**
 * Liar's Dice for 2 to 6 players, with hidden dice: each player's roll is
 * sent to their seat alone and shown to everyone only when a bid is called.
 *
 * Rules as played here:
 * - A match starts `start_ms` after two or more players are seated and no
 *   match is running; everyone seated then plays, each with 5 dice. Who
 *   sits during a match plays the next one.
 * - Each round every die in play is rolled. Players bid in seat order, the
 *   first one drawn at random at the start of a match: "at least `count`
 *   dice on the table show `face`". **Ones are wild**: they count as every
 *   face, so a bid names a face from 2 to 6. A bid must be higher than the
 *   last: more dice, or as many of a higher face; at most the number of
 *   dice in play.
 * - Instead of bidding, the player whose turn it is may call the last bid a
 *   lie ("liar"): all dice are shown; if fewer than `count` of them show
 *   `face` or 1, the bidder loses a die, otherwise the caller does. The
 *   loser starts the next round (if out, the next player in seat order).
 * - A player with no dice left is out; the last one with dice wins the
 *   match (`ctx.handEnded()`), and the next match starts after `start_ms`.
 * - Turn timer, `turn_ms`: for a player who does not act in time (dropped
 *   or not), the table opens with the lowest bid (one 2) or, facing a bid,
 *   calls it.
 * - A player who leaves during a match is out: their dice no longer count.
 *   The bid standing stays (it is a claim about the table; calling it is now
 *   easier). If it was their turn, the next player's starts; if it was their
 *   bid and it is called false, nobody loses a die. The last player left in
 *   the match wins it.
 *
 * Actions: `{"t":"bid","count":3,"face":4}`, `{"t":"liar"}`. Refusals:
 * `malformed` (not one of those shapes, or not integers), `out_of_turn`
 * (no match, not in it, not your turn), `illegal` (a bid not higher, a face
 * outside 2–6, more dice than in play, "liar" with no bid).
 *
 * Messages, by seat in arrays indexed by seat:
 * - to one seat: `{"t":"dice","round":3,"dice":[1,4,4,6]}`: your roll;
 * - to the table: `{"t":"match","match":1,"players":[0,2]}`,
 *   `{"t":"round","round":3,"counts":[4,0,5],"turn":2}` (dice per seat),
 *   `{"t":"bid","seat":2,"count":3,"face":4,"turn":0,"auto":false}`,
 *   `{"t":"liar","seat":0,"bid":{…},"dice":[[…],[],[…]],"matched":2,"loser":2,"auto":false}`,
 *   `{"t":"out","seat":2}`, `{"t":"left","seat":1,"turn":0}`,
 *   `{"t":"winner","seat":0,"match":1}`, `{"t":"starting","ms":3000}`,
 *   `{"t":"away","seat":1,"away":true}` (dropped; `false`: back).
 *
 * Snapshot: `{"t":"state","playing","match","round","turn","bid","players":[{user,count,away}|null],"dice"?}`
 * where `dice`, the seat's own roll, is there only for a seated player.
 * Lobby: `players` (seated), `waiting` (no match running: a new player
 * plays the next one soon). Params: `turn_ms` [15000], `start_ms` [3000].
 */

import type { Bot, Ctx, Game, Json, Seat } from "herald-client/game";

const DICE = 5;
const MAX_SEATS = 6;

type Player = {
  user: string;
  /** This round's roll, sorted; empty when not in the match (out, or sat during it). */
  dice: number[];
  /** Dropped: the turn timer plays for them. */
  away: boolean;
};

type Bid = { seat: Seat; count: number; face: number };

type State = {
  /** Usable seats: the table's, up to 6. */
  seats: number;
  turnMs: number;
  startMs: number;
  players: (Player | null)[];
  playing: boolean;
  match: number;
  round: number;
  turn: Seat | null;
  bid: Bid | null;
};

/** A positive integer parameter, or its default. */
function param(params: { readonly [key: string]: Json }, name: string, fallback: number): number {
  const v = params[name];
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : fallback;
}

const seated = (s: State) => s.players.filter((p) => p !== null).length;
const inPlay = (s: State, seat: Seat) => (s.players[seat]?.dice.length ?? 0) > 0;
const inPlaySeats = (s: State) => s.players.flatMap((_, seat) => (inPlay(s, seat) ? [seat] : []));
const totalDice = (s: State) => s.players.reduce((n, p) => n + (p?.dice.length ?? 0), 0);

/** The next seat after `from` (which may be out or empty) still in the match. */
function next(s: State, from: Seat): Seat {
  for (let i = 1; i <= s.seats; i++) {
    const seat = (from + i) % s.seats;
    if (inPlay(s, seat)) return seat;
  }
  return from;
}

function lobby(s: State, ctx: Ctx): void {
  ctx.lobby({ players: seated(s), waiting: !s.playing });
}

/**
 * Arms the start timer if a match can start: when a second player sits with
 * no match running, or a match ends with two or more seated. The timer is
 * pending exactly while no match runs and two or more are seated (`left`
 * cancels it below two), so later players do not push the start back.
 */
function scheduleStart(s: State, ctx: Ctx): void {
  if (s.playing || seated(s) < 2) return;
  ctx.setTimer("start", s.startMs);
  ctx.broadcast({ t: "starting", ms: s.startMs });
}

function startMatch(s: State, ctx: Ctx): void {
  s.playing = true;
  s.match += 1;
  s.round = 0;
  const players = s.players.flatMap((p, seat) => (p ? [seat] : []));
  for (const seat of players) (s.players[seat] as Player).dice = new Array<number>(DICE).fill(0);
  ctx.broadcast({ t: "match", match: s.match, players });
  lobby(s, ctx);
  startRound(s, ctx, players[ctx.randomInt(players.length)] as Seat);
}

function startRound(s: State, ctx: Ctx, first: Seat): void {
  s.round += 1;
  s.bid = null;
  for (const seat of inPlaySeats(s)) {
    const p = s.players[seat] as Player;
    p.dice = p.dice.map(() => 1 + ctx.randomInt(6)).sort((a, b) => a - b);
    ctx.send(seat, { t: "dice", round: s.round, dice: p.dice });
  }
  const counts = s.players.map((p) => p?.dice.length ?? 0);
  ctx.broadcast({ t: "round", round: s.round, counts, turn: first });
  setTurn(s, ctx, first);
}

function setTurn(s: State, ctx: Ctx, seat: Seat): void {
  s.turn = seat;
  ctx.setTimer("turn", s.turnMs);
}

function endMatch(s: State, ctx: Ctx, winner: Seat): void {
  ctx.broadcast({ t: "winner", seat: winner, match: s.match });
  ctx.handEnded();
  ctx.cancelTimer("turn");
  s.playing = false;
  s.turn = null;
  s.bid = null;
  for (const p of s.players) if (p) p.dice = [];
  lobby(s, ctx);
  scheduleStart(s, ctx);
}

function bid(s: State, ctx: Ctx, seat: Seat, count: number, face: number, auto: boolean): void {
  s.bid = { seat, count, face };
  const turn = next(s, seat);
  ctx.broadcast({ t: "bid", seat, count, face, turn, auto });
  setTurn(s, ctx, turn);
}

function callLiar(s: State, ctx: Ctx, seat: Seat, auto: boolean): void {
  const called = s.bid as Bid;
  // Copies: the loser's array loses a die below, after this is sent.
  const dice = s.players.map((p) => (p ? [...p.dice] : []));
  const matched = dice.flat().filter((d) => d === called.face || d === 1).length;
  const liar = matched < called.count;
  // The bidder may have left since: then nobody loses.
  const loser = liar ? (inPlay(s, called.seat) ? called.seat : null) : seat;
  ctx.broadcast({ t: "liar", seat, bid: called, dice, matched, loser, auto });
  ctx.cancelTimer("turn");
  s.bid = null;
  s.turn = null;
  let first = seat;
  if (loser !== null) {
    const p = s.players[loser] as Player;
    p.dice.pop();
    if (p.dice.length === 0) ctx.broadcast({ t: "out", seat: loser });
    first = p.dice.length > 0 ? loser : next(s, loser);
  }
  const left = inPlaySeats(s);
  if (left.length === 1) endMatch(s, ctx, left[0] as Seat);
  else startRound(s, ctx, first);
}

/** Is `data` a well-formed action? Returns it typed, or why not. */
function parse(data: Json): { t: "bid"; count: number; face: number } | { t: "liar" } | string {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return 'an object: {"t":"bid","count":3,"face":4} or {"t":"liar"}';
  if (data.t === "liar") return { t: "liar" };
  if (data.t !== "bid") return 't must be "bid" or "liar"';
  const { count, face } = data;
  if (!Number.isInteger(count) || !Number.isInteger(face)) return "count and face must be integers";
  return { t: "bid", count: count as number, face: face as number };
}

export const game: Game<State> = {
  created(ctx, table) {
    const s: State = {
      seats: Math.min(table.seats, MAX_SEATS),
      turnMs: param(table.params, "turn_ms", 15000),
      startMs: param(table.params, "start_ms", 3000),
      players: new Array<Player | null>(Math.min(table.seats, MAX_SEATS)).fill(null),
      playing: false,
      match: 0,
      round: 0,
      turn: null,
      bid: null,
    };
    lobby(s, ctx);
    return s;
  },

  canSit: (s, seat) => (seat < s.seats ? undefined : `liar's dice seats ${s.seats} players at most`),

  sat(s, ctx, seat, user) {
    s.players[seat] = { user, dice: [], away: false };
    lobby(s, ctx);
    if (seated(s) === 2) scheduleStart(s, ctx);
  },

  left(s, ctx, seat) {
    const playing = inPlay(s, seat);
    s.players[seat] = null;
    lobby(s, ctx);
    if (!s.playing && seated(s) < 2) ctx.cancelTimer("start");
    if (!playing) return;
    const left = inPlaySeats(s);
    if (left.length === 1) {
      ctx.broadcast({ t: "left", seat, turn: null });
      return endMatch(s, ctx, left[0] as Seat);
    }
    if (s.turn === seat) setTurn(s, ctx, next(s, seat));
    ctx.broadcast({ t: "left", seat, turn: s.turn });
  },

  dropped(s, ctx, seat) {
    (s.players[seat] as Player).away = true;
    ctx.broadcast({ t: "away", seat, away: true });
  },

  returned(s, ctx, seat) {
    (s.players[seat] as Player).away = false;
    ctx.broadcast({ t: "away", seat, away: false });
  },

  act(s, ctx, seat, data) {
    const a = parse(data);
    if (typeof a === "string") return ctx.malformed(a);
    if (!s.playing) return ctx.outOfTurn("no match is running");
    if (!inPlay(s, seat)) return ctx.outOfTurn("you are not in this match");
    if (s.turn !== seat) return ctx.outOfTurn("not your turn");
    if (a.t === "liar") {
      if (s.bid === null) return ctx.illegal("no bid to call: open with a bid");
      return callLiar(s, ctx, seat, false);
    }
    if (a.face < 2 || a.face > 6) return ctx.illegal("ones are wild: bid a face from 2 to 6");
    const total = totalDice(s);
    if (a.count < 1 || a.count > total) return ctx.illegal(`bid from 1 to ${total} dice`);
    const last = s.bid;
    if (last && !(a.count > last.count || (a.count === last.count && a.face > last.face))) {
      return ctx.illegal(`bid higher than ${last.count} × ${last.face}: more dice, or as many of a higher face`);
    }
    return bid(s, ctx, seat, a.count, a.face, false);
  },

  timer(s, ctx, key) {
    if (key === "start") {
      if (!s.playing && seated(s) >= 2) startMatch(s, ctx);
    } else if (key === "turn" && s.playing && s.turn !== null) {
      if (s.bid) callLiar(s, ctx, s.turn, true);
      else bid(s, ctx, s.turn, 1, 2, true);
    }
  },

  snapshot(s, seat) {
    const view: { [key: string]: Json } = {
      t: "state",
      playing: s.playing,
      match: s.match,
      round: s.round,
      turn: s.turn,
      bid: s.bid,
      players: s.players.map((p) => p && { user: p.user, count: p.dice.length, away: p.away }),
    };
    if (seat !== null) view.dice = s.players[seat]?.dice ?? [];
    return view;
  },
};

type Memory = {
  seat: Seat;
  /** Own roll this round. */
  dice: number[];
  /** Dice per seat this round. */
  counts: number[];
  bid: Bid | null;
  turn: Seat | null;
};

const isObject = (v: Json): v is { [key: string]: Json } => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Decides from its own dice only: any other die shows a given face or a one
 * with probability 1/3, so it expects `own(face) + others / 3` of a face.
 * It calls a bid that exceeds that expectation by more than half a die;
 * otherwise it raises to the cheapest bid on the face it expects most of,
 * unless even that is over a die beyond expectation (then it calls).
 */
function decide(m: Memory): Json {
  const total = m.counts.reduce((a, b) => a + b, 0);
  const others = total - m.dice.length;
  const expect = (face: number) => m.dice.filter((d) => d === face || d === 1).length + others / 3;
  const last = m.bid;
  if (last && last.count > expect(last.face) + 0.5) return { t: "liar" };
  let best: { count: number; face: number; margin: number } | null = null;
  for (let face = 2; face <= 6; face++) {
    const count = !last ? 1 : face > last.face ? last.count : last.count + 1;
    if (count > total) continue;
    const margin = expect(face) - count;
    if (!best || margin > best.margin) best = { count, face, margin };
  }
  if (!best || (last && best.margin < -1)) return { t: "liar" };
  return { t: "bid", count: best.count, face: best.face };
}

export const bot: Bot<Memory> = {
  init: (seat) => ({ seat, dice: [], counts: [], bid: null, turn: null }),
  on(m, kind, msg) {
    if (!isObject(msg)) return undefined;
    if (kind === "snapshot") {
      m.dice = (msg.dice as number[] | undefined) ?? [];
      m.counts = (msg.players as ({ count: number } | null)[]).map((p) => p?.count ?? 0);
      m.bid = msg.bid as Bid | null;
      m.turn = msg.turn as Seat | null;
    } else {
      switch (msg.t) {
        case "dice":
          m.dice = msg.dice as number[];
          return undefined; // the round message follows
        case "round":
          m.counts = msg.counts as number[];
          m.bid = null;
          m.turn = msg.turn as Seat;
          break;
        case "bid":
          m.bid = { seat: msg.seat as Seat, count: msg.count as number, face: msg.face as number };
          m.turn = msg.turn as Seat;
          break;
        case "left":
          m.counts[msg.seat as Seat] = 0;
          m.turn = msg.turn as Seat | null;
          break;
        case "liar":
        case "winner":
          m.turn = null;
          return undefined;
        default:
          return undefined;
      }
    }
    return m.turn === m.seat && m.dice.length > 0 ? decide(m) : undefined;
  },
};
