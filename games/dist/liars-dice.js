// Built from games/src/ by games/build.mjs: edit the TypeScript source and run `npm run build` in games/.

// src/liars-dice.ts
var DICE = 5;
var MAX_SEATS = 6;
function param(params, name, fallback) {
  const v = params[name];
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : fallback;
}
var seated = (s) => s.players.filter((p) => p !== null).length;
var inPlay = (s, seat) => (s.players[seat]?.dice.length ?? 0) > 0;
var inPlaySeats = (s) => s.players.flatMap((_, seat) => inPlay(s, seat) ? [seat] : []);
var totalDice = (s) => s.players.reduce((n, p) => n + (p?.dice.length ?? 0), 0);
function next(s, from) {
  for (let i = 1; i <= s.seats; i++) {
    const seat = (from + i) % s.seats;
    if (inPlay(s, seat)) return seat;
  }
  return from;
}
function lobby(s, ctx) {
  ctx.lobby({ players: seated(s), waiting: !s.playing });
}
function scheduleStart(s, ctx) {
  if (s.playing || seated(s) < 2) return;
  ctx.setTimer("start", s.startMs);
  ctx.broadcast({ t: "starting", ms: s.startMs });
}
function startMatch(s, ctx) {
  s.playing = true;
  s.match += 1;
  s.round = 0;
  const players = s.players.flatMap((p, seat) => p ? [seat] : []);
  for (const seat of players) s.players[seat].dice = new Array(DICE).fill(0);
  ctx.broadcast({ t: "match", match: s.match, players });
  lobby(s, ctx);
  startRound(s, ctx, players[ctx.randomInt(players.length)]);
}
function startRound(s, ctx, first) {
  s.round += 1;
  s.bid = null;
  for (const seat of inPlaySeats(s)) {
    const p = s.players[seat];
    p.dice = p.dice.map(() => 1 + ctx.randomInt(6)).sort((a, b) => a - b);
    ctx.send(seat, { t: "dice", round: s.round, dice: p.dice });
  }
  const counts = s.players.map((p) => p?.dice.length ?? 0);
  ctx.broadcast({ t: "round", round: s.round, counts, turn: first });
  setTurn(s, ctx, first);
}
function setTurn(s, ctx, seat) {
  s.turn = seat;
  ctx.setTimer("turn", s.turnMs);
}
function endMatch(s, ctx, winner) {
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
function bid(s, ctx, seat, count, face, auto) {
  s.bid = { seat, count, face };
  const turn = next(s, seat);
  ctx.broadcast({ t: "bid", seat, count, face, turn, auto });
  setTurn(s, ctx, turn);
}
function callLiar(s, ctx, seat, auto) {
  const called = s.bid;
  const dice = s.players.map((p) => p ? [...p.dice] : []);
  const matched = dice.flat().filter((d) => d === called.face || d === 1).length;
  const liar = matched < called.count;
  const loser = liar ? inPlay(s, called.seat) ? called.seat : null : seat;
  ctx.broadcast({ t: "liar", seat, bid: called, dice, matched, loser, auto });
  ctx.cancelTimer("turn");
  s.bid = null;
  s.turn = null;
  let first = seat;
  if (loser !== null) {
    const p = s.players[loser];
    p.dice.pop();
    if (p.dice.length === 0) ctx.broadcast({ t: "out", seat: loser });
    first = p.dice.length > 0 ? loser : next(s, loser);
  }
  const left = inPlaySeats(s);
  if (left.length === 1) endMatch(s, ctx, left[0]);
  else startRound(s, ctx, first);
}
function parse(data) {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return 'an object: {"t":"bid","count":3,"face":4} or {"t":"liar"}';
  if (data.t === "liar") return { t: "liar" };
  if (data.t !== "bid") return 't must be "bid" or "liar"';
  const { count, face } = data;
  if (!Number.isInteger(count) || !Number.isInteger(face)) return "count and face must be integers";
  return { t: "bid", count, face };
}
var game = {
  created(ctx, table) {
    const s = {
      seats: Math.min(table.seats, MAX_SEATS),
      turnMs: param(table.params, "turn_ms", 15e3),
      startMs: param(table.params, "start_ms", 3e3),
      players: new Array(Math.min(table.seats, MAX_SEATS)).fill(null),
      playing: false,
      match: 0,
      round: 0,
      turn: null,
      bid: null
    };
    lobby(s, ctx);
    return s;
  },
  canSit: (s, seat) => seat < s.seats ? void 0 : `liar's dice seats ${s.seats} players at most`,
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
      return endMatch(s, ctx, left[0]);
    }
    if (s.turn === seat) setTurn(s, ctx, next(s, seat));
    ctx.broadcast({ t: "left", seat, turn: s.turn });
  },
  dropped(s, ctx, seat) {
    s.players[seat].away = true;
    ctx.broadcast({ t: "away", seat, away: true });
  },
  returned(s, ctx, seat) {
    s.players[seat].away = false;
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
    if (last && !(a.count > last.count || a.count === last.count && a.face > last.face)) {
      return ctx.illegal(`bid higher than ${last.count} \xD7 ${last.face}: more dice, or as many of a higher face`);
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
    const view = {
      t: "state",
      playing: s.playing,
      match: s.match,
      round: s.round,
      turn: s.turn,
      bid: s.bid,
      players: s.players.map((p) => p && { user: p.user, count: p.dice.length, away: p.away })
    };
    if (seat !== null) view.dice = s.players[seat]?.dice ?? [];
    return view;
  }
};
var isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
function decide(m) {
  const total = m.counts.reduce((a, b) => a + b, 0);
  const others = total - m.dice.length;
  const expect = (face) => m.dice.filter((d) => d === face || d === 1).length + others / 3;
  const last = m.bid;
  if (last && last.count > expect(last.face) + 0.5) return { t: "liar" };
  let best = null;
  for (let face = 2; face <= 6; face++) {
    const count = !last ? 1 : face > last.face ? last.count : last.count + 1;
    if (count > total) continue;
    const margin = expect(face) - count;
    if (!best || margin > best.margin) best = { count, face, margin };
  }
  if (!best || last && best.margin < -1) return { t: "liar" };
  return { t: "bid", count: best.count, face: best.face };
}
var bot = {
  init: (seat) => ({ seat, dice: [], counts: [], bid: null, turn: null }),
  on(m, kind, msg) {
    if (!isObject(msg)) return void 0;
    if (kind === "snapshot") {
      m.dice = msg.dice ?? [];
      m.counts = msg.players.map((p) => p?.count ?? 0);
      m.bid = msg.bid;
      m.turn = msg.turn;
    } else {
      switch (msg.t) {
        case "dice":
          m.dice = msg.dice;
          return void 0;
        // the round message follows
        case "round":
          m.counts = msg.counts;
          m.bid = null;
          m.turn = msg.turn;
          break;
        case "bid":
          m.bid = { seat: msg.seat, count: msg.count, face: msg.face };
          m.turn = msg.turn;
          break;
        case "left":
          m.counts[msg.seat] = 0;
          m.turn = msg.turn;
          break;
        case "liar":
        case "winner":
          m.turn = null;
          return void 0;
        default:
          return void 0;
      }
    }
    return m.turn === m.seat && m.dice.length > 0 ? decide(m) : void 0;
  }
};
export {
  bot,
  game
};
