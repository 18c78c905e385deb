/**
 * Liar's Dice (games/src/liars-dice.ts, whose header lists the messages):
 * our own roll, each player's dice count, the bid standing and whose turn
 * it is, a bid form and a "Liar!" button, and each round's result with
 * every die shown. Only what the server sent to this seat is drawn, so the
 * others' dice appear nowhere before a call reveals them.
 *
 * The module's messages give no turn deadline (`turn_ms` is a table
 * parameter the lobby does not show), so the countdown shown is the one
 * they do give: the time to the next match (`starting`). The time the
 * current turn has lasted is shown instead of a deadline.
 */

import { button, el, isObj, seatLabel, type GameContext, type Obj, type Renderer } from "./kit.js";

type Player = { user: string; count: number; away: boolean; out: boolean };
type Bid = { seat: number; count: number; face: number };

const FACES = ["", "⚀", "⚁", "⚂", "⚃", "⚄", "⚅"];

export function diceRenderer(root: HTMLElement, ctx: GameContext): Renderer {
  const players: (Player | null)[] = [];
  let dice: number[] = [];
  let bid: Bid | null = null;
  let turn: number | null = null;
  let playing = false;
  let match = 0;
  let round = 0;
  /** Date.now() when the current turn started, and when the next match starts. */
  let turnSince = 0;
  let startsAt = 0;
  let acting = false;

  const status = el("p", "—", "status");
  status.id = "dice-status";
  const clock = el("span", "", "status");
  clock.id = "dice-clock";
  const table = el("table");
  table.id = "dice-players";
  table.append(el("thead"), el("tbody"));
  table.tHead!.append(el("tr"));
  for (const h of ["seat", "player", "dice", "status"]) table.tHead!.rows[0]!.append(el("th", h));
  const mine = el("span", "", "dice");
  mine.id = "my-dice";
  mine.setAttribute("aria-label", "your dice");
  const bidText = el("b", "—");
  bidText.id = "dice-bid";

  const count = el("input");
  count.id = "bid-count";
  count.type = "number";
  count.min = "1";
  count.step = "1";
  count.setAttribute("aria-label", "how many dice");
  const face = el("select");
  face.id = "bid-face";
  face.setAttribute("aria-label", "face");
  for (let f = 2; f <= 6; f++) {
    const o = el("option", `${f} ${FACES[f]}`);
    o.value = String(f);
    face.append(o);
  }
  const bidButton = el("button", "Bid");
  bidButton.type = "submit";
  bidButton.id = "bid-submit";
  const liar = button("call-liar", "Liar!", () => void send({ t: "liar" }));
  const form = el("form");
  form.id = "dice-actions";
  form.autocomplete = "off";
  // The game judges a bid (and a refusal is shown), not the browser.
  form.noValidate = true;
  form.append(count, " × ", face, " ", bidButton, " ", liar);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void send({ t: "bid", count: Number(count.value), face: Number(face.value) });
  });
  const results = el("ol");
  results.id = "rounds";
  results.dataset.count = "0";

  const line = (label: string, ...content: (Node | string)[]) => {
    const p = el("p");
    p.append(el("span", `${label} `, "label"), ...content);
    return p;
  };
  root.append(
    status,
    table,
    line("your dice", mine),
    line("bid", bidText, " ", clock),
    form,
    el("h3", "Rounds"),
    results,
  );

  const name = (seat: number) => seatLabel(seat, ctx.seat, players[seat]?.user);
  const total = () => players.reduce((n, p) => n + (p?.count ?? 0), 0);

  async function send(action: Obj): Promise<void> {
    acting = true;
    render();
    if (!(await ctx.act(action))) acting = false;
    render();
  }

  /** The cheapest bid above the standing one, to preset the form with. */
  function nextBid(): { count: number; face: number } {
    if (bid === null) return { count: 1, face: 2 };
    return bid.face < 6 ? { count: bid.count, face: bid.face + 1 } : { count: bid.count + 1, face: 2 };
  }

  function setTurn(seat: number | null): void {
    turn = seat;
    turnSince = Date.now();
    acting = false;
    if (seat === ctx.seat) {
      const n = nextBid();
      count.value = String(n.count);
      face.value = String(n.face);
    }
  }

  function addResult(li: HTMLLIElement): void {
    results.prepend(li);
    while (results.children.length > 30) results.lastElementChild?.remove();
    results.dataset.count = String(Number(results.dataset.count) + 1);
  }

  function dieEl(d: number): HTMLElement {
    const s = el("span", FACES[d] ?? String(d), "die");
    s.dataset.face = String(d);
    s.setAttribute("role", "img");
    s.setAttribute("aria-label", String(d));
    return s;
  }

  function tickClock(): void {
    const now = Date.now();
    if (!playing && startsAt > now) clock.textContent = `next match in ${((startsAt - now) / 1000).toFixed(1)} s`;
    else if (playing && turn !== null) clock.textContent = `${turn === ctx.seat ? "your" : `${name(turn)}'s`} turn for ${((now - turnSince) / 1000).toFixed(0)} s`;
    else clock.textContent = "";
  }
  const timer = setInterval(tickClock, 200);

  function render(): void {
    root.dataset.turn = turn === null ? "" : String(turn);
    root.dataset.round = String(round);
    status.textContent = !playing
      ? match === 0 ? "waiting for a second player" : `match ${match} over: waiting for the next`
      : `match ${match} · round ${round} · ${turn === null ? "—" : turn === ctx.seat ? "your turn" : `${name(turn)} to play`}`;
    const tbody = table.tBodies[0]!;
    tbody.replaceChildren(
      ...players.flatMap((p, seat) => {
        if (p === null) return [];
        const tr = el("tr");
        tr.dataset.seat = String(seat);
        tr.dataset.count = String(p.count);
        if (seat === ctx.seat) tr.classList.add("me");
        if (seat === turn) tr.classList.add("turn");
        const flags = [seat === turn ? "to play" : "", p.away ? "away" : "", p.out ? "out" : ""].filter(Boolean);
        // A count of hidden dice, never their faces.
        tr.append(el("td", String(seat)), el("td", seat === ctx.seat ? `you (${p.user})` : p.user), el("td", "▪".repeat(p.count) + ` ${p.count}`), el("td", flags.join(", ") || "—"));
        return [tr];
      }),
    );
    mine.replaceChildren(...(dice.length > 0 ? dice.map(dieEl) : [el("span", ctx.seat === null ? "watching" : "—", "status")]));
    mine.dataset.dice = dice.join(" ");
    bidText.textContent = bid === null ? "none yet" : `${bid.count} × ${bid.face} ${FACES[bid.face]} by ${name(bid.seat)}`;
    if (bid === null) delete bidText.dataset.bid;
    else bidText.dataset.bid = `${bid.count}x${bid.face}`;
    const myTurn = playing && ctx.seat !== null && turn === ctx.seat && !acting;
    form.dataset.mine = String(myTurn);
    count.max = String(total());
    count.disabled = face.disabled = bidButton.disabled = !myTurn;
    liar.disabled = !myTurn || bid === null;
    form.hidden = ctx.seat === null;
    tickClock();
  }

  function setPlayer(seat: number, p: Player | null): void {
    while (players.length <= seat) players.push(null);
    players[seat] = p;
  }

  return {
    snapshot(s) {
      if (!isObj(s)) return;
      playing = s.playing === true;
      match = Number(s.match ?? 0);
      round = Number(s.round ?? 0);
      bid = isObj(s.bid) ? (s.bid as Bid) : null;
      dice = Array.isArray(s.dice) ? (s.dice as number[]) : [];
      players.length = 0;
      (Array.isArray(s.players) ? s.players : []).forEach((p, seat) =>
        setPlayer(seat, isObj(p) ? { user: String(p.user), count: Number(p.count), away: p.away === true, out: false } : null),
      );
      setTurn(typeof s.turn === "number" ? s.turn : null);
      render();
    },

    message(m) {
      if (!isObj(m)) return;
      switch (m.t) {
        case "dice":
          dice = m.dice as number[];
          break;
        case "match":
          playing = true;
          match = Number(m.match);
          startsAt = 0;
          for (const p of players) if (p) p.out = false;
          break;
        case "round": {
          round = Number(m.round);
          bid = null;
          (m.counts as number[]).forEach((c, seat) => {
            const p = players[seat];
            if (p) p.count = c;
          });
          if (ctx.seat !== null && (players[ctx.seat]?.count ?? 0) === 0) dice = [];
          setTurn(Number(m.turn));
          break;
        }
        case "bid":
          bid = { seat: Number(m.seat), count: Number(m.count), face: Number(m.face) };
          setTurn(Number(m.turn));
          break;
        case "liar": {
          const called = m.bid as Bid;
          const shown = m.dice as number[][];
          const li = el("li");
          li.dataset.round = String(round);
          li.dataset.loser = m.loser === null ? "" : String(m.loser);
          const caller = Number(m.seat);
          const loser = m.loser === null ? "nobody loses a die" : `${name(Number(m.loser))} loses a die`;
          li.append(
            el("b", `Round ${round}: `),
            `${name(caller)} ${m.auto ? "(timed out) " : ""}called ${name(called.seat)}'s ${called.count} × ${called.face}: ${String(m.matched)} matched — ${loser}.`,
          );
          shown.forEach((ds, seat) => {
            if (ds.length === 0) return;
            const span = el("span", "", "dice");
            span.dataset.seat = String(seat);
            span.append(...ds.map(dieEl));
            li.append(el("br"), `${name(seat)}: `, span);
          });
          addResult(li);
          bid = null;
          setTurn(null);
          break;
        }
        case "out": {
          const p = players[Number(m.seat)];
          if (p) {
            p.out = true;
            p.count = 0;
          }
          if (m.seat === ctx.seat) dice = [];
          break;
        }
        case "left":
          if (players[Number(m.seat)]) (players[Number(m.seat)] as Player).count = 0;
          setTurn(typeof m.turn === "number" ? m.turn : null);
          break;
        case "winner": {
          playing = false;
          bid = null;
          dice = [];
          setTurn(null);
          const li = el("li");
          li.dataset.winner = String(m.seat);
          li.append(el("b", `Match ${String(m.match)}: `), `${name(Number(m.seat))} wins.`);
          addResult(li);
          break;
        }
        case "starting":
          startsAt = Date.now() + Number(m.ms);
          break;
        case "away": {
          const p = players[Number(m.seat)];
          if (p) p.away = m.away === true;
          break;
        }
      }
      render();
    },

    seat(p) {
      if (p.status === "sat" && !players[p.seat]) setPlayer(p.seat, { user: p.user, count: 0, away: false, out: false });
      else if (p.status === "left") setPlayer(p.seat, null);
      render();
    },

    destroy() {
      clearInterval(timer);
    },
  };
}
