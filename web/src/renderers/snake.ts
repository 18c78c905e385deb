/**
 * Snake (games/src/snake.ts): a <canvas> redrawn from each tick's broadcast
 * (`{"t":"tick","n","s":[bodies by seat],"f":[food]}`, a cell being
 * `y * w + x`), arrow keys and on-screen buttons that send `{"dir":…}`, and
 * a legend of the snakes. The server owns the physics: the page draws what
 * it is sent and predicts nothing.
 *
 * For tests and the curious the canvas carries `data-tick` (the last tick
 * drawn), `data-head` (our head's cell, "" while dead), `data-dir` (the way
 * our snake last moved) and `data-drawn` (the seats drawn, e.g. "0 1").
 */

import { button, el, isObj, seatLabel, type GameContext, type Renderer } from "./kit.js";

const CELL = 16;
const COLOURS = ["#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b", "#975a16", "#4a5568"];
const KEYS: Record<string, string> = { ArrowUp: "up", ArrowDown: "down", ArrowLeft: "left", ArrowRight: "right" };

export function snakeRenderer(root: HTMLElement, ctx: GameContext): Renderer {
  let w = 32;
  let h = 24;
  let goal = 0;
  let match = 1;
  let n = 0;
  let food: number[] = [];
  let bodies: (number[] | null)[] = [];
  const users: (string | null)[] = [];
  const wins: string[] = [];

  const status = el("p", "—", "status");
  status.id = "snake-status";
  const canvas = el("canvas");
  canvas.id = "snake-board";
  canvas.tabIndex = 0;
  canvas.setAttribute("aria-label", "the board: arrow keys steer");
  const legend = el("ul");
  legend.id = "snake-legend";
  const pad = el("div");
  pad.id = "snake-pad";
  const steer = (dir: string) => void ctx.act({ dir });
  for (const dir of ["up", "left", "down", "right"]) {
    pad.append(button(`dir-${dir}`, { up: "↑", left: "←", down: "↓", right: "→" }[dir]!, () => steer(dir)));
  }
  pad.hidden = ctx.seat === null;
  const results = el("ol");
  results.id = "snake-results";
  root.append(status, canvas, pad, legend, el("h3", "Matches"), results);

  function onKey(ev: KeyboardEvent): void {
    const dir = KEYS[ev.key];
    const target = ev.target as HTMLElement | null;
    if (dir === undefined || ctx.seat === null || target?.tagName === "INPUT" || target?.tagName === "TEXTAREA") return;
    ev.preventDefault();
    steer(dir);
  }
  document.addEventListener("keydown", onKey);

  /** The direction from the neck to the head. */
  function heading(body: number[] | null | undefined): string {
    if (!body || body.length < 2) return "";
    const [head, neck] = body as [number, number];
    const dx = (head % w) - (neck % w);
    const dy = Math.floor(head / w) - Math.floor(neck / w);
    return dx === 1 ? "right" : dx === -1 ? "left" : dy === 1 ? "down" : dy === -1 ? "up" : "";
  }

  function draw(): void {
    if (canvas.width !== w * CELL || canvas.height !== h * CELL) {
      canvas.width = w * CELL;
      canvas.height = h * CELL;
    }
    const g = canvas.getContext("2d");
    if (g === null) return;
    g.fillStyle = "#fbfcfe";
    g.fillRect(0, 0, canvas.width, canvas.height);
    g.strokeStyle = "#eef0f3";
    g.beginPath();
    for (let x = 1; x < w; x++) {
      g.moveTo(x * CELL + 0.5, 0);
      g.lineTo(x * CELL + 0.5, canvas.height);
    }
    for (let y = 1; y < h; y++) {
      g.moveTo(0, y * CELL + 0.5);
      g.lineTo(canvas.width, y * CELL + 0.5);
    }
    g.stroke();
    const cell = (c: number, inset: number) => g.fillRect((c % w) * CELL + inset, Math.floor(c / w) * CELL + inset, CELL - 2 * inset, CELL - 2 * inset);
    g.fillStyle = "#e53e3e";
    for (const c of food) cell(c, 4);
    bodies.forEach((body, seat) => {
      if (!body) return;
      g.fillStyle = COLOURS[seat % COLOURS.length]!;
      body.forEach((c, i) => cell(c, i === 0 ? 0 : 2));
      if (seat === ctx.seat && body.length > 0) {
        const head = body[0]!;
        g.strokeStyle = "#1d2330";
        g.lineWidth = 2;
        g.strokeRect((head % w) * CELL + 1, Math.floor(head / w) * CELL + 1, CELL - 2, CELL - 2);
        g.lineWidth = 1;
      }
    });
    const me = ctx.seat === null ? null : bodies[ctx.seat];
    canvas.dataset.tick = String(n);
    canvas.dataset.head = me && me.length > 0 ? String(me[0]) : "";
    canvas.dataset.dir = heading(me);
    canvas.dataset.drawn = bodies.flatMap((b, seat) => (b ? [seat] : [])).join(" ");

    const mine = ctx.seat === null ? "watching" : me ? `your snake: length ${me.length}, heading ${heading(me) || "—"}` : "your snake is waiting to respawn";
    status.textContent = `match ${match} · tick ${n} · first to ${goal} wins · ${mine}`;
    legend.replaceChildren(
      ...users.flatMap((user, seat) => {
        if (user === null) return [];
        const li = el("li");
        li.dataset.seat = String(seat);
        const swatch = el("span", "■");
        swatch.style.color = COLOURS[seat % COLOURS.length]!;
        const body = bodies[seat];
        li.append(swatch, ` ${seatLabel(seat, ctx.seat, user)}: ${body ? `length ${body.length}` : "dead"}`);
        return [li];
      }),
    );
  }

  return {
    snapshot(s) {
      if (!isObj(s)) return;
      w = Number(s.w);
      h = Number(s.h);
      goal = Number(s.goal);
      match = Number(s.match);
      n = Number(s.n);
      food = (s.f as number[]) ?? [];
      const snakes = Array.isArray(s.snakes) ? s.snakes : [];
      users.length = 0;
      bodies = snakes.map((x, seat) => {
        users[seat] = isObj(x) ? String(x.user) : null;
        return isObj(x) && Array.isArray(x.body) && x.body.length > 0 ? (x.body as number[]) : null;
      });
      draw();
    },

    message(m) {
      if (!isObj(m)) return;
      if (m.t === "tick") {
        n = Number(m.n);
        bodies = m.s as (number[] | null)[];
        food = m.f as number[];
        draw();
      } else if (m.t === "winner") {
        wins.unshift(`Match ${String(m.match)}: ${seatLabel(Number(m.seat), ctx.seat, users[Number(m.seat)])} wins.`);
        match = Number(m.match) + 1;
        results.replaceChildren(...wins.slice(0, 20).map((t) => el("li", t)));
      }
    },

    seat(p) {
      while (users.length <= p.seat) users.push(null);
      if (p.status === "sat") users[p.seat] = p.user;
      else if (p.status === "left") {
        users[p.seat] = null;
        bodies[p.seat] = null;
      }
      draw();
    },

    destroy() {
      document.removeEventListener("keydown", onKey);
    },
  };
}
