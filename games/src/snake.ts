/**
 * Snake, in real time, for 2 to 8 players on one grid (32 × 24 cells by
 * default): the loop of a real-time game on `ctx.every`. The server owns the
 * physics; players only steer.
 *
 * - While anyone is seated the table ticks every `tick_ms` [50] (20 Hz); an
 *   empty table stops its loop (`every(0)`), so it costs nothing.
 * - Each tick every snake moves one cell. A head on food grows the snake by
 *   one; the food reappears on a free cell drawn with `ctx.randomInt`
 *   (`food` [3] pieces on the board).
 * - A head that leaves the grid, or enters a cell a snake still holds after
 *   this tick's moves (its own body, another's, or another head entering
 *   the same cell), dies; so a head may follow a tail that moves away.
 *   Moves are simultaneous: snakes dying in a tick still block that tick.
 * - A dead snake respawns `respawn_ms` [2000] later, length 3, at a random
 *   place with three free cells ahead of it; a dropped player's snake goes
 *   on straight and is not respawned until they return.
 * - The first snake to reach length `goal` [20] wins the match
 *   (`ctx.handEnded()`); every snake then respawns for the next.
 *
 * A cell is one number, `y * width + x`: compact on the wire and cheap to
 * compare. Action: `{"dir":"up"|"down"|"left"|"right"}`, applied at the next
 * tick; turning back onto the snake's neck is refused as `illegal`, steering
 * a dead snake as `out_of_turn`, anything else as `malformed`.
 *
 * Messages, to the table:
 * - each tick `{"t":"tick","n":812,"s":[[cells, head first]|null, …],"f":[cells],"died":[seats]}`
 *   (`s` by seat: `null` for an empty seat or a dead snake);
 * - `{"t":"winner","seat":2,"match":1}`.
 *
 * Snapshot (the same for players and watchers: nothing is hidden):
 * `{"t":"board","w","h","goal","match","n","f","snakes":[{user,body,dir,away}|null]}`.
 * Lobby: `players`. Params: `width` [32], `height` [24], `tick_ms`,
 * `respawn_ms`, `goal`, `food`.
 */

import type { Bot, Ctx, Game, Json, Seat } from "herald-client/game";

const MAX_SEATS = 8;
const START_LENGTH = 3;
/** Free cells a respawned snake needs ahead of its head, so it does not die at once. */
const ROOM_AHEAD = 3;

const DIRS = ["up", "right", "down", "left"] as const;
type Dir = (typeof DIRS)[number];
const DX: Record<Dir, number> = { up: 0, right: 1, down: 0, left: -1 };
const DY: Record<Dir, number> = { up: -1, right: 0, down: 1, left: 0 };
const OPPOSITE: Record<Dir, Dir> = { up: "down", right: "left", down: "up", left: "right" };

type Snake = {
  user: string;
  /** Cells, head first; empty while dead. */
  body: number[];
  /** The direction of the last move. */
  dir: Dir;
  /** The direction of the next move (the last accepted action). */
  next: Dir;
  /** The tick at which a dead snake comes back. */
  respawn: number;
  /** Dropped: moves on, but is not respawned. */
  away: boolean;
};

type State = {
  w: number;
  h: number;
  seats: number;
  tickMs: number;
  respawnTicks: number;
  goal: number;
  foodCount: number;
  /** Ticks so far. */
  n: number;
  match: number;
  food: number[];
  snakes: (Snake | null)[];
};

/** An integer parameter within [min, max], or its default. */
function param(params: { readonly [key: string]: Json }, name: string, fallback: number, min: number, max: number): number {
  const v = params[name];
  return typeof v === "number" && Number.isInteger(v) && v >= min && v <= max ? v : fallback;
}

/** The cell one step from `cell` towards `dir`, or -1 off the grid. */
function step(s: State, cell: number, dir: Dir): number {
  const x = (cell % s.w) + DX[dir];
  const y = Math.floor(cell / s.w) + DY[dir];
  return x < 0 || y < 0 || x >= s.w || y >= s.h ? -1 : y * s.w + x;
}

/** Which cells are taken by a snake or food. */
function occupancy(s: State): boolean[] {
  const taken = new Array<boolean>(s.w * s.h).fill(false);
  for (const snake of s.snakes) for (const c of snake?.body ?? []) taken[c] = true;
  for (const c of s.food) taken[c] = true;
  return taken;
}

/** Tops the food up to `foodCount` pieces, on free cells drawn at random. */
function placeFood(s: State, ctx: Ctx): void {
  // Most ticks eat nothing: no board to build then.
  if (s.food.length >= s.foodCount) return;
  const taken = occupancy(s);
  while (s.food.length < s.foodCount) {
    const free = taken.flatMap((t, c) => (t ? [] : [c]));
    if (free.length === 0) return;
    const c = free[ctx.randomInt(free.length)] as number;
    s.food.push(c);
    taken[c] = true;
  }
}

/** Puts a dead snake back at a random free place, if there is one (else it waits a tick). */
function respawn(s: State, ctx: Ctx, snake: Snake): void {
  const taken = occupancy(s);
  // The cells a snake born at `head` heading `dir` takes, plus the room it
  // needs ahead: false if any is off the board or taken.
  const fits = (head: number, dir: Dir): boolean => {
    for (let i = 0, c = head; i < START_LENGTH; i++, c = step(s, c, OPPOSITE[dir])) {
      if (c < 0 || taken[c]) return false;
    }
    for (let i = 0, c = head; i < ROOM_AHEAD; i++) {
      c = step(s, c, dir);
      if (c < 0 || taken[c]) return false;
    }
    return true;
  };
  // A few random draws find a place on a board that is mostly free (the
  // usual case) without looking at every cell; a crowded board is scanned.
  const places: [number, Dir][] = [];
  for (let tries = 0; tries < 32 && places.length === 0; tries++) {
    const head = ctx.randomInt(s.w * s.h);
    const dir = DIRS[ctx.randomInt(DIRS.length)] as Dir;
    if (fits(head, dir)) places.push([head, dir]);
  }
  for (let head = 0; places.length === 0 && head < s.w * s.h; head++) {
    for (const dir of DIRS) if (fits(head, dir)) places.push([head, dir]);
  }
  if (places.length === 0) return;
  const [head, dir] = places[ctx.randomInt(places.length)] as [number, Dir];
  snake.body = [head];
  for (let i = 1; i < START_LENGTH; i++) snake.body.push(step(s, snake.body[i - 1] as number, OPPOSITE[dir]));
  snake.dir = snake.next = dir;
}

/** One tick: respawns, simultaneous moves, deaths, food, the match, then the broadcast. */
function tick(s: State, ctx: Ctx): void {
  s.n += 1;
  s.snakes.forEach((snake) => {
    if (snake && snake.body.length === 0 && !snake.away && s.n >= snake.respawn) respawn(s, ctx, snake);
  });

  const alive = s.snakes.flatMap((snake, seat) => (snake && snake.body.length > 0 ? [{ seat, snake }] : []));
  const moves = alive.map(({ seat, snake }) => {
    const head = step(s, snake.body[0] as number, snake.next);
    return { seat, snake, head, eats: s.food.includes(head) };
  });
  // What stays taken after the moves: every body but the tails that move on.
  const held = new Set<number>();
  for (const m of moves) m.snake.body.slice(0, m.eats ? undefined : -1).forEach((c) => held.add(c));
  const died: Seat[] = [];
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

  ctx.broadcast({ t: "tick", n: s.n, s: s.snakes.map((snake) => (snake && snake.body.length > 0 ? snake.body : null)), f: s.food, died });

  const longest = s.snakes.reduce<Seat | null>((best, snake, seat) => {
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

const seated = (s: State) => s.snakes.filter((x) => x !== null).length;

export const game: Game<State> = {
  created(ctx, table) {
    const p = table.params;
    const tickMs = param(p, "tick_ms", 50, 10, 10_000);
    const s: State = {
      w: param(p, "width", 32, 8, 256),
      h: param(p, "height", 24, 8, 256),
      seats: Math.min(table.seats, MAX_SEATS),
      tickMs,
      respawnTicks: Math.ceil(param(p, "respawn_ms", 2000, 0, 600_000) / tickMs),
      goal: param(p, "goal", 20, START_LENGTH + 1, 10_000),
      foodCount: param(p, "food", 3, 1, 100),
      n: 0,
      match: 1,
      food: [],
      snakes: new Array<Snake | null>(Math.min(table.seats, MAX_SEATS)).fill(null),
    };
    placeFood(s, ctx);
    ctx.lobby({ players: 0 });
    return s;
  },

  canSit: (s, seat) => (seat < s.seats ? undefined : `snake seats ${s.seats} players at most`),

  sat(s, ctx, seat, user) {
    // Born dead, due now: the next tick places it.
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
    (s.snakes[seat] as Snake).away = true;
  },

  returned(s, _ctx, seat) {
    (s.snakes[seat] as Snake).away = false;
  },

  act(s, ctx, seat, data) {
    const dir = data !== null && typeof data === "object" && !Array.isArray(data) ? data.dir : undefined;
    if (!DIRS.includes(dir as Dir)) return ctx.malformed('{"dir": "up", "down", "left" or "right"}');
    const snake = s.snakes[seat] as Snake;
    if (snake.body.length === 0) return ctx.outOfTurn("your snake is waiting to respawn");
    if (dir === OPPOSITE[snake.dir]) return ctx.illegal("a snake cannot turn back on itself");
    snake.next = dir as Dir;
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
    snakes: s.snakes.map((x) => x && { user: x.user, body: x.body, dir: x.dir, away: x.away }),
  }),
};

type Memory = { seat: Seat; w: number; h: number };

/**
 * Steers towards the nearest food (Manhattan distance) among the moves that
 * do not hit a wall or a body this tick, keeping its direction on a tie;
 * with no safe move it goes straight. It sends an action only to turn.
 */
export const bot: Bot<Memory> = {
  init: (seat) => ({ seat, w: 32, h: 24 }),
  on(m, kind, msg) {
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) return undefined;
    if (kind === "snapshot") {
      m.w = msg.w as number;
      m.h = msg.h as number;
      return undefined;
    }
    if (msg.t !== "tick") return undefined;
    const bodies = msg.s as (number[] | null)[];
    const me = bodies[m.seat];
    if (!me || me.length < 2) return undefined;
    const [head, neck] = me as [number, number];
    const xy = (c: number) => [c % m.w, Math.floor(c / m.w)] as const;
    const [hx, hy] = xy(head);
    const [nx, ny] = xy(neck);
    const current = DIRS.find((d) => hx - nx === DX[d] && hy - ny === DY[d]) as Dir;
    const taken = new Set(bodies.flatMap((b) => b ?? []));
    const food = (msg.f as number[]).map(xy);
    const distance = (x: number, y: number) => Math.min(...food.map(([fx, fy]) => Math.abs(fx - x) + Math.abs(fy - y)));
    let best: { dir: Dir; d: number } | null = null;
    for (const dir of [current, ...DIRS.filter((d) => d !== current && d !== OPPOSITE[current])]) {
      const x = hx + DX[dir];
      const y = hy + DY[dir];
      if (x < 0 || y < 0 || x >= m.w || y >= m.h || taken.has(y * m.w + x)) continue;
      const d = distance(x, y);
      if (!best || d < best.d) best = { dir, d };
    }
    return best && best.dir !== current ? { dir: best.dir } : undefined;
  },
};
