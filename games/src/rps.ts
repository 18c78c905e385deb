/**
 * Rock-paper-scissors, best of three: crates/game/examples/rps.rs as a game
 * module, with the same rules and messages. Two seats (a seat past the
 * second is refused). Picks are secret until both are in; no pick within
 * 5 s loses the round (both missing: nobody scores). A left player resets
 * the score.
 *
 * Actions are JSON strings: `"rock"`, `"paper"` or `"scissors"` (the Rust
 * game reads the bare word; a module's actions are JSON).
 *
 * Messages (all to the table but `picked`):
 * - `{"t":"round","score":[0,1]}`: a round starts, pick now;
 * - `{"t":"picked","pick":"rock"}`: to the picker only;
 * - `{"t":"reveal","picks":["rock","none"],"w":0}`: both picks, and the
 *   round's winner (`null`: a draw, or nobody picked);
 * - `{"t":"match","winner":0}`: two wins; the score starts again.
 *
 * Snapshot: `{"t":"state","score":[0,1]}`. Lobby: `waiting` (a seat is free).
 */

import type { Bot, Ctx, Game, Seat } from "herald-client/game";

const PICKS = ["rock", "paper", "scissors"] as const;
/** The pick timer: a round without a pick by then is decided without it. */
const PICK_MS = 5000;

type State = {
  /** This round's picks by seat (index into PICKS), secret until both are in. */
  picks: (number | null)[];
  wins: number[];
  seated: boolean[];
};

const both = (s: State) => s.seated[0] === true && s.seated[1] === true;

function startRound(s: State, ctx: Ctx): void {
  s.picks = [null, null];
  ctx.broadcast({ t: "round", score: s.wins });
  ctx.setTimer("pick", PICK_MS);
}

/** Decides the round; a missing pick loses (both missing: nobody scores). */
function decide(s: State, ctx: Ctx): void {
  ctx.cancelTimer("pick");
  const [a, b] = s.picks;
  let winner: Seat | null;
  if (a != null && b != null) winner = a === b ? null : (a + 3 - b) % 3 === 1 ? 0 : 1;
  else if (a == null && b == null) winner = null;
  else winner = a != null ? 0 : 1;
  if (winner !== null) s.wins[winner] = (s.wins[winner] ?? 0) + 1;
  const shown = s.picks.map((p) => (p == null ? "none" : PICKS[p] ?? "none"));
  ctx.broadcast({ t: "reveal", picks: shown, w: winner });
  const champion = s.wins.indexOf(2);
  if (champion >= 0) {
    ctx.broadcast({ t: "match", winner: champion });
    ctx.handEnded();
    s.wins = [0, 0];
  }
  if (both(s)) startRound(s, ctx);
}

export const game: Game<State> = {
  created: () => ({ picks: [null, null], wins: [0, 0], seated: [false, false] }),

  canSit: (_s, seat) => (seat < 2 ? undefined : "two seats"),

  sat(s, ctx, seat) {
    s.seated[seat] = true;
    ctx.lobby({ waiting: !both(s) });
    if (both(s)) startRound(s, ctx);
  },

  left(s, ctx, seat) {
    s.seated[seat] = false;
    s.wins = [0, 0];
    ctx.cancelTimer("pick");
    ctx.lobby({ waiting: true });
  },

  act(s, ctx, seat, data) {
    const pick = typeof data === "string" ? PICKS.indexOf(data as (typeof PICKS)[number]) : -1;
    if (pick < 0) return ctx.malformed("rock, paper or scissors");
    if (s.picks[seat] != null || !both(s)) return ctx.outOfTurn("wait for the next round");
    s.picks[seat] = pick;
    ctx.send(seat, { t: "picked", pick: PICKS[pick] as string });
    if (s.picks.every((p) => p != null)) decide(s, ctx);
  },

  timer: (s, ctx) => decide(s, ctx),

  snapshot: (s) => ({ t: "state", score: s.wins }),
};

type Memory = { seat: Seat; n: number };

/**
 * Picks round after round along a cycle: rock, paper, scissors for seat 0,
 * the other way round for seat 1, so two bots tie one round in three
 * whatever their phase (with the same cycle they could tie for ever). The
 * snapshot does not say whether a round is open, so a bot picks on it too:
 * refused (out of turn) if not, accepted if its seat completed the table.
 */
export const bot: Bot<Memory> = {
  init: (seat) => ({ seat, n: 0 }),
  on(m, kind, msg) {
    const t = msg !== null && typeof msg === "object" && !Array.isArray(msg) ? msg.t : undefined;
    if (kind === "snapshot" || t === "round") return PICKS[(m.n++ * (m.seat === 0 ? 1 : 2)) % 3];
    return undefined;
  },
};
