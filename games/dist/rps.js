// Built from games/src/ by games/build.mjs: edit the TypeScript source and run `npm run build` in games/.

// src/rps.ts
var PICKS = ["rock", "paper", "scissors"];
var PICK_MS = 5e3;
var both = (s) => s.seated[0] === true && s.seated[1] === true;
function startRound(s, ctx) {
  s.picks = [null, null];
  ctx.broadcast({ t: "round", score: s.wins });
  ctx.setTimer("pick", PICK_MS);
}
function decide(s, ctx) {
  ctx.cancelTimer("pick");
  const [a, b] = s.picks;
  let winner;
  if (a != null && b != null) winner = a === b ? null : (a + 3 - b) % 3 === 1 ? 0 : 1;
  else if (a == null && b == null) winner = null;
  else winner = a != null ? 0 : 1;
  if (winner !== null) s.wins[winner] = (s.wins[winner] ?? 0) + 1;
  const shown = s.picks.map((p) => p == null ? "none" : PICKS[p] ?? "none");
  ctx.broadcast({ t: "reveal", picks: shown, w: winner });
  const champion = s.wins.indexOf(2);
  if (champion >= 0) {
    ctx.broadcast({ t: "match", winner: champion });
    ctx.handEnded();
    s.wins = [0, 0];
  }
  if (both(s)) startRound(s, ctx);
}
var game = {
  created: () => ({ picks: [null, null], wins: [0, 0], seated: [false, false] }),
  canSit: (_s, seat) => seat < 2 ? void 0 : "two seats",
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
    const pick = typeof data === "string" ? PICKS.indexOf(data) : -1;
    if (pick < 0) return ctx.malformed("rock, paper or scissors");
    if (s.picks[seat] != null || !both(s)) return ctx.outOfTurn("wait for the next round");
    s.picks[seat] = pick;
    ctx.send(seat, { t: "picked", pick: PICKS[pick] });
    if (s.picks.every((p) => p != null)) decide(s, ctx);
  },
  timer: (s, ctx) => decide(s, ctx),
  snapshot: (s) => ({ t: "state", score: s.wins })
};
var bot = {
  init: (seat) => ({ seat, n: 0 }),
  on(m, kind, msg) {
    const t = msg !== null && typeof msg === "object" && !Array.isArray(msg) ? msg.t : void 0;
    if (kind === "snapshot" || t === "round") return PICKS[m.n++ * (m.seat === 0 ? 1 : 2) % 3];
    return void 0;
  }
};
export {
  bot,
  game
};
