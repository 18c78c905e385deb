// Built from games/src/ by games/build.mjs: edit the TypeScript source and run `npm run build` in games/.

// src/snake.ts
var MAX_SEATS = 8;
var START_LENGTH = 3;
var ROOM_AHEAD = 3;
var DIRS = ["up", "right", "down", "left"];
var DX = { up: 0, right: 1, down: 0, left: -1 };
var DY = { up: -1, right: 0, down: 1, left: 0 };
var OPPOSITE = { up: "down", right: "left", down: "up", left: "right" };
function param(params, name, fallback, min, max) {
  const v = params[name];
  return typeof v === "number" && Number.isInteger(v) && v >= min && v <= max ? v : fallback;
}
function step(s, cell, dir) {
  const x = cell % s.w + DX[dir];
  const y = Math.floor(cell / s.w) + DY[dir];
  return x < 0 || y < 0 || x >= s.w || y >= s.h ? -1 : y * s.w + x;
}
function occupancy(s) {
  const taken = new Array(s.w * s.h).fill(false);
  for (const snake of s.snakes) for (const c of snake?.body ?? []) taken[c] = true;
  for (const c of s.food) taken[c] = true;
  return taken;
}
function placeFood(s, ctx) {
  if (s.food.length >= s.foodCount) return;
  const taken = occupancy(s);
  while (s.food.length < s.foodCount) {
    const free = taken.flatMap((t, c2) => t ? [] : [c2]);
    if (free.length === 0) return;
    const c = free[ctx.randomInt(free.length)];
    s.food.push(c);
    taken[c] = true;
  }
}
function respawn(s, ctx, snake) {
  const taken = occupancy(s);
  const fits = (head2, dir2) => {
    for (let i = 0, c = head2; i < START_LENGTH; i++, c = step(s, c, OPPOSITE[dir2])) {
      if (c < 0 || taken[c]) return false;
    }
    for (let i = 0, c = head2; i < ROOM_AHEAD; i++) {
      c = step(s, c, dir2);
      if (c < 0 || taken[c]) return false;
    }
    return true;
  };
  const places = [];
  for (let tries = 0; tries < 32 && places.length === 0; tries++) {
    const head2 = ctx.randomInt(s.w * s.h);
    const dir2 = DIRS[ctx.randomInt(DIRS.length)];
    if (fits(head2, dir2)) places.push([head2, dir2]);
  }
  for (let head2 = 0; places.length === 0 && head2 < s.w * s.h; head2++) {
    for (const dir2 of DIRS) if (fits(head2, dir2)) places.push([head2, dir2]);
  }
  if (places.length === 0) return;
  const [head, dir] = places[ctx.randomInt(places.length)];
  snake.body = [head];
  for (let i = 1; i < START_LENGTH; i++) snake.body.push(step(s, snake.body[i - 1], OPPOSITE[dir]));
  snake.dir = snake.next = dir;
}
function tick(s, ctx) {
  s.n += 1;
  s.snakes.forEach((snake) => {
    if (snake && snake.body.length === 0 && !snake.away && s.n >= snake.respawn) respawn(s, ctx, snake);
  });
  const alive = s.snakes.flatMap((snake, seat) => snake && snake.body.length > 0 ? [{ seat, snake }] : []);
  const moves = alive.map(({ seat, snake }) => {
    const head = step(s, snake.body[0], snake.next);
    return { seat, snake, head, eats: s.food.includes(head) };
  });
  const held = /* @__PURE__ */ new Set();
  for (const m of moves) m.snake.body.slice(0, m.eats ? void 0 : -1).forEach((c) => held.add(c));
  const died = [];
  for (const m of moves) {
    const crash = m.head < 0 || held.has(m.head) || moves.some((o) => o !== m && o.head === m.head);
    if (crash) died.push(m.seat);
  }
  for (const m of moves) {
    if (died.includes(m.seat)) {
      m.snake.body = [];
      m.snake.respawn = s.n + s.respawnTicks;
      continue;
    }
    m.snake.dir = m.snake.next;
    m.snake.body.unshift(m.head);
    if (m.eats) s.food.splice(s.food.indexOf(m.head), 1);
    else m.snake.body.pop();
  }
  placeFood(s, ctx);
  ctx.broadcast({ t: "tick", n: s.n, s: s.snakes.map((snake) => snake && snake.body.length > 0 ? snake.body : null), f: s.food, died });
  const longest = s.snakes.reduce((best, snake, seat) => {
    const len = snake?.body.length ?? 0;
    return len >= s.goal && (best === null || len > (s.snakes[best]?.body.length ?? 0)) ? seat : best;
  }, null);
  if (longest !== null) {
    ctx.broadcast({ t: "winner", seat: longest, match: s.match });
    ctx.handEnded();
    s.match += 1;
    for (const snake of s.snakes) {
      if (snake) {
        snake.body = [];
        snake.respawn = s.n + s.respawnTicks;
      }
    }
  }
}
var seated = (s) => s.snakes.filter((x) => x !== null).length;
var game = {
  created(ctx, table) {
    const p = table.params;
    const tickMs = param(p, "tick_ms", 50, 10, 1e4);
    const s = {
      w: param(p, "width", 32, 8, 256),
      h: param(p, "height", 24, 8, 256),
      seats: Math.min(table.seats, MAX_SEATS),
      tickMs,
      respawnTicks: Math.ceil(param(p, "respawn_ms", 2e3, 0, 6e5) / tickMs),
      goal: param(p, "goal", 20, START_LENGTH + 1, 1e4),
      foodCount: param(p, "food", 3, 1, 100),
      n: 0,
      match: 1,
      food: [],
      snakes: new Array(Math.min(table.seats, MAX_SEATS)).fill(null)
    };
    placeFood(s, ctx);
    ctx.lobby({ players: 0 });
    return s;
  },
  canSit: (s, seat) => seat < s.seats ? void 0 : `snake seats ${s.seats} players at most`,
  sat(s, ctx, seat, user) {
    s.snakes[seat] = { user, body: [], dir: "right", next: "right", respawn: s.n, away: false };
    if (seated(s) === 1) ctx.every(s.tickMs);
    ctx.lobby({ players: seated(s) });
  },
  left(s, ctx, seat) {
    s.snakes[seat] = null;
    if (seated(s) === 0) ctx.every(0);
    ctx.lobby({ players: seated(s) });
  },
  dropped(s, _ctx, seat) {
    s.snakes[seat].away = true;
  },
  returned(s, _ctx, seat) {
    s.snakes[seat].away = false;
  },
  act(s, ctx, seat, data) {
    const dir = data !== null && typeof data === "object" && !Array.isArray(data) ? data.dir : void 0;
    if (!DIRS.includes(dir)) return ctx.malformed('{"dir": "up", "down", "left" or "right"}');
    const snake = s.snakes[seat];
    if (snake.body.length === 0) return ctx.outOfTurn("your snake is waiting to respawn");
    if (dir === OPPOSITE[snake.dir]) return ctx.illegal("a snake cannot turn back on itself");
    snake.next = dir;
  },
  tick,
  snapshot: (s) => ({
    t: "board",
    w: s.w,
    h: s.h,
    goal: s.goal,
    match: s.match,
    n: s.n,
    f: s.food,
    snakes: s.snakes.map((x) => x && { user: x.user, body: x.body, dir: x.dir, away: x.away })
  })
};
var bot = {
  init: (seat) => ({ seat, w: 32, h: 24 }),
  on(m, kind, msg) {
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) return void 0;
    if (kind === "snapshot") {
      m.w = msg.w;
      m.h = msg.h;
      return void 0;
    }
    if (msg.t !== "tick") return void 0;
    const bodies = msg.s;
    const me = bodies[m.seat];
    if (!me || me.length < 2) return void 0;
    const [head, neck] = me;
    const xy = (c) => [c % m.w, Math.floor(c / m.w)];
    const [hx, hy] = xy(head);
    const [nx, ny] = xy(neck);
    const current = DIRS.find((d) => hx - nx === DX[d] && hy - ny === DY[d]);
    const taken = new Set(bodies.flatMap((b) => b ?? []));
    const food = msg.f.map(xy);
    const distance = (x, y) => Math.min(...food.map(([fx, fy]) => Math.abs(fx - x) + Math.abs(fy - y)));
    let best = null;
    for (const dir of [current, ...DIRS.filter((d) => d !== current && d !== OPPOSITE[current])]) {
      const x = hx + DX[dir];
      const y = hy + DY[dir];
      if (x < 0 || y < 0 || x >= m.w || y >= m.h || taken.has(y * m.w + x)) continue;
      const d = distance(x, y);
      if (!best || d < best.d) best = { dir, d };
    }
    return best && best.dir !== current ? { dir: best.dir } : void 0;
  }
};
export {
  bot,
  game
};
