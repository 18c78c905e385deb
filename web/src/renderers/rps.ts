/**
 * Rock-paper-scissors (games/src/rps.ts, the module version of
 * crates/game/examples/rps.rs): three buttons, the score, our pick, and each
 * round's reveal. The module's pick timer (5 s) is not in its messages, so
 * no countdown is shown.
 */

import { button, el, isObj, type GameContext, type Renderer } from "./kit.js";

const PICKS = ["rock", "paper", "scissors"] as const;

export function rpsRenderer(root: HTMLElement, ctx: GameContext): Renderer {
  let score = [0, 0];
  let open = false;
  let picked: string | null = null;

  const status = el("p", "—", "status");
  status.id = "rps-status";
  const scoreEl = el("p", "", "score");
  scoreEl.id = "rps-score";
  const buttons = PICKS.map((p) =>
    button(`rps-${p}`, p, () => {
      picked = p;
      render();
      void ctx.act(p).then((ok) => {
        if (!ok) picked = null;
        render();
      });
    }),
  );
  const bar = el("p");
  bar.id = "rps-picks";
  bar.append(...buttons.flatMap((b) => [b, " "]));
  bar.hidden = ctx.seat === null;
  const reveals = el("ol");
  reveals.id = "rps-reveals";
  reveals.dataset.count = "0";
  root.append(status, scoreEl, bar, el("h3", "Rounds"), reveals);

  const who = (seat: number) => (seat === ctx.seat ? "you" : `seat ${seat}`);

  function render(): void {
    scoreEl.textContent = `${who(0)} ${score[0] ?? 0} – ${score[1] ?? 0} ${who(1)}`;
    scoreEl.dataset.score = score.join("-");
    status.textContent = ctx.seat === null ? "watching" : !open ? "waiting for an opponent" : picked ? `you picked ${picked}: waiting for the other pick` : "pick now (5 s)";
    for (const b of buttons) b.disabled = !open || picked !== null;
  }

  function add(li: HTMLLIElement): void {
    reveals.prepend(li);
    while (reveals.children.length > 30) reveals.lastElementChild?.remove();
    reveals.dataset.count = String(Number(reveals.dataset.count) + 1);
  }

  return {
    snapshot(s) {
      if (isObj(s) && Array.isArray(s.score)) score = s.score as number[];
      // The snapshot does not say whether a round is open: assume it is when
      // both seats may be taken; a pick out of turn is refused and shown.
      open = true;
      render();
    },
    message(m) {
      if (!isObj(m)) return;
      if (m.t === "round") {
        score = m.score as number[];
        open = true;
        picked = null;
      } else if (m.t === "picked") {
        picked = String(m.pick);
      } else if (m.t === "reveal") {
        const picks = m.picks as string[];
        const li = el("li");
        li.dataset.winner = m.w === null ? "" : String(m.w);
        const result = m.w === null ? "a draw" : `${who(Number(m.w))} ${m.w === ctx.seat ? "win" : "wins"}`;
        li.textContent = picks.map((p, seat) => `${who(seat)}: ${p}`).join(" vs ") + `: ${result}.`;
        add(li);
        open = false;
        picked = null;
      } else if (m.t === "match") {
        add(el("li", `Match: ${who(Number(m.winner))} ${m.winner === ctx.seat ? "win" : "wins"} best of three.`));
      }
      render();
    },
    seat(p) {
      if (p.status === "left") {
        open = false;
        score = [0, 0];
      }
      render();
    },
    destroy() {},
  };
}
