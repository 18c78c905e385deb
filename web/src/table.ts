/**
 * The poker page served by `herald serve` at `/table.html`: the live lobby
 * (the `lobby` snapshot, then `lobby_update` deltas kept by the SDK's
 * `Lobby`), a Texas Hold'em table to sit at or watch (the game's `state`
 * snapshot, then its events, drawn as they come), buttons to act, and the
 * table's chat on the ordinary channel `table:{id}`. Everything goes through
 * the TypeScript SDK; the messages are those of crates/holdem/README.md.
 *
 * Besides the lobby's tables, `play` (docs/protocol.md §5f): "Play now"
 * seats the person at a 6-seat table with a free seat (or a new one), "New
 * private table" creates one and shows its code and share link, and a code
 * typed in (or `?code=` in the page's URL) joins that private table. After a
 * reconnect such a seat is taken back with `sit`, as any other.
 *
 * The page keeps one `View` of the table it is at, built from the snapshot
 * and amended by each event, so that what it shows never needs a second
 * request. Game events that arrive before the snapshot (possible when one
 * long-poll response carries both) wait in a queue until it is applied.
 */

import {
  Client, ErrorCode, Lobby, ReplyError,
  type GamePush, type PlayOptions, type Publication, type SeatPush, type TableEntry, type TransportKind,
} from "herald-client";
import { connectionPanel } from "./panel.js";
import { baseTexts, joinButtons, renderLobbyRows } from "./lobby-table.js";
import { normalizeCode, playCatching, shareLink } from "./play.js";

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`#${id} missing`);
  return el as T;
};

const el = <K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, cls?: string): HTMLElementTagNameMap[K] => {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls !== undefined) e.className = cls;
  return e;
};

const params = new URLSearchParams(location.search);
// SSE can only watch (it sends no commands): a player needs WebSocket or
// long-polling. `?transport=longpoll` forces long-polling.
const transports: TransportKind[] = params.get("transport") === "longpoll" ? ["longpoll"] : ["websocket", "longpoll"];
const client = new Client(new URL(".", location.href).href, { transports, name: "poker page" });
const decoder = new TextDecoder();

// ------------------------------------------------------------ game messages
// crates/holdem/README.md, "Messages".

interface SeatState {
  seat: number;
  user: string;
  /** null while unknown (a `seat` push before the game's `sat` event). */
  stack: number | null;
  bet: number;
  folded: boolean;
  all_in: boolean;
  sitting_out: boolean;
  in_hand: boolean;
  away?: boolean;
}

interface StateEvent {
  t: "state";
  hand: number;
  street: string;
  button: number | null;
  sb: number;
  bb: number;
  board: string[];
  pot: number;
  seats: SeatState[];
  turn: number | null;
  to_call: number;
  min_raise_to?: number | null;
  max_raise_to?: number | null;
  cards?: string[];
}

interface HandEvent { t: "hand"; hand: number; button: number; sb_seat: number; bb_seat: number; sb: number; bb: number; seats: { seat: number; stack: number }[] }
interface CardsEvent { t: "cards"; hand: number; cards: string[] }
interface TurnEvent { t: "turn"; seat: number; to_call: number; min_raise_to?: number | null; max_raise_to?: number | null; pot: number; timeout_ms: number }
interface ActionEvent { t: "action"; seat: number; a: string; amount: number; bet: number; stack: number; pot: number; auto?: boolean }
interface StreetEvent { t: "street"; street: string; board: string[]; pot: number }
interface ResultEvent {
  t: "result";
  hand: number;
  board: string[];
  pots: { amount: number; winners: number[]; rank?: string | null }[];
  shown: { seat: number; cards: string[]; rank: string }[];
  returned: { seat: number; amount: number } | null;
  stacks: { seat: number; stack: number }[];
}
interface SeatFlagEvent { t: "sitout" | "sitin"; seat: number }
interface RebuyEvent { t: "rebuy"; seat: number; amount: number; stack: number }
interface SatEvent { t: "sat"; seat: number; user: string; stack: number }

type GameEvent = StateEvent | HandEvent | CardsEvent | TurnEvent | ActionEvent | StreetEvent | ResultEvent | SeatFlagEvent | RebuyEvent | SatEvent;

// ------------------------------------------------------------ connection panel

connectionPanel(client, $, () => rejoin());

// ------------------------------------------------------------------- lobby

const lobby = new Lobby("");

/** A lobby entry's attrs, parsed (an object; `{}` if unreadable). */
function attrsOf(t: TableEntry): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(decoder.decode(t.attrs));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Hold'em's lobby attributes (crates/holdem): `stakes` ("5/10"), `sb`/`bb`,
 * `min_buyin`/`max_buyin`; the engine adds `game` and `timing`. */
function stakesOf(a: Record<string, unknown>): string {
  if (typeof a.stakes === "string") return a.stakes;
  return a.sb !== undefined && a.bb !== undefined ? `${String(a.sb)}/${String(a.bb)}` : "—";
}

function buyinOf(a: Record<string, unknown>): string {
  return a.min_buyin !== undefined && a.max_buyin !== undefined ? `${String(a.min_buyin)}–${String(a.max_buyin)}` : "—";
}

/** The lobby's rows by table id: updated in place, so that a button with the
 * keyboard focus keeps it while deltas arrive. */
const lobbyRows = new Map<number, HTMLTableRowElement>();

function lobbyRow(t: TableEntry): HTMLTableRowElement {
  const tr = el("tr");
  tr.dataset.table = String(t.table);
  for (let i = 0; i < 6; i++) tr.append(el("td"));
  const td = el("td", undefined, "lobby-actions");
  const a = attrsOf(t);
  if (a.game !== "holdem") td.textContent = "not Hold'em";
  else if (joinButtons(td, t.table, a, (table, mode) => void join(table, mode)) === 0) td.textContent = "private";
  tr.append(td);
  return tr;
}

function renderLobby(): void {
  renderLobbyRows(
    lobby,
    document.querySelector<HTMLTableSectionElement>("#lobby tbody")!,
    lobbyRows,
    {
      make: lobbyRow,
      texts: (t) => {
        const a = attrsOf(t);
        return [...baseTexts(t), stakesOf(a), buyinOf(a), String(a.timing ?? "—")];
      },
      current: () => view,
    },
    $("lobby-status"),
  );
}

client.on("lobby_update", (u) => {
  if (!lobby.apply(u)) return;
  renderLobby();
  // A table made by `play` may enter the lobby after the page sat there: name it then.
  const v = view;
  if (v !== null && v.ready && u.tables.some((t) => t.table === v.table)) renderTable();
});

async function loadLobby(): Promise<void> {
  lobby.reset(await client.lobby(""));
  renderLobby();
}

// ------------------------------------------------------------------- table

interface View {
  table: number;
  mode: "sit" | "watch";
  /** Our seat, when sitting. */
  seat: number | null;
  /** The private table's code, when `play` made one. */
  code: string | null;
  /** False until the snapshot is applied; events wait in `queue` meanwhile. */
  ready: boolean;
  queue: GameEvent[];
  hand: number;
  street: string;
  button: number | null;
  board: string[];
  pot: number;
  seats: Map<number, SeatState>;
  turn: number | null;
  toCall: number;
  minRaiseTo: number | null;
  maxRaiseTo: number | null;
  /** When the seat to act runs out of time (Date.now() ms), and the time it had. */
  deadline: number;
  timeoutMs: number;
  cards: string[];
  /** An action is on its way: the buttons stay off until the game answers
   * it with an event (or refuses it). */
  acting: boolean;
}

let view: View | null = null;

function newView(table: number, mode: "sit" | "watch"): View {
  return {
    table, mode, seat: null, code: null, ready: false, queue: [],
    hand: 0, street: "idle", button: null, board: [], pot: 0, seats: new Map(),
    turn: null, toCall: 0, minRaiseTo: null, maxRaiseTo: null, deadline: 0, timeoutMs: 0,
    cards: [], acting: false,
  };
}

function parseGame(data: Uint8Array): GameEvent | null {
  try {
    const v: unknown = JSON.parse(decoder.decode(data));
    return typeof v === "object" && v !== null && typeof (v as { t?: unknown }).t === "string" ? (v as GameEvent) : null;
  } catch {
    return null;
  }
}

function setTurn(v: View, seat: number | null, e?: { to_call: number; min_raise_to?: number | null; max_raise_to?: number | null; timeout_ms?: number }): void {
  v.turn = seat;
  v.acting = false; // whatever we sent has been answered by the game
  v.toCall = e?.to_call ?? 0;
  v.minRaiseTo = e?.min_raise_to ?? null;
  v.maxRaiseTo = e?.max_raise_to ?? null;
  v.timeoutMs = e?.timeout_ms ?? 0;
  v.deadline = e?.timeout_ms !== undefined ? Date.now() + e.timeout_ms : 0;
}

/** Applies one game event to the view. */
function apply(v: View, e: GameEvent): void {
  switch (e.t) {
    case "state":
      v.hand = e.hand;
      v.street = e.street;
      v.button = e.button;
      v.board = e.board;
      v.pot = e.pot;
      v.seats = new Map(e.seats.map((s) => [s.seat, { ...s }]));
      // A snapshot does not say how long the seat to act has left.
      setTurn(v, e.turn, e.turn === null ? undefined : e);
      v.cards = e.cards ?? [];
      break;
    case "hand": {
      v.hand = e.hand;
      v.street = "preflop";
      v.button = e.button;
      v.board = [];
      v.cards = [];
      setTurn(v, null);
      const dealt = new Set(e.seats.map((s) => s.seat));
      for (const s of v.seats.values()) {
        s.bet = 0;
        s.folded = false;
        s.all_in = false;
        s.in_hand = dealt.has(s.seat);
      }
      for (const d of e.seats) {
        const s = v.seats.get(d.seat);
        if (s !== undefined) s.stack = d.stack;
      }
      let pot = 0;
      for (const [seat, blind] of [[e.sb_seat, e.sb], [e.bb_seat, e.bb]] as const) {
        const s = v.seats.get(seat);
        if (s === undefined || s.stack === null) continue;
        const posted = Math.min(blind, s.stack);
        s.bet = posted;
        s.stack -= posted;
        s.all_in = s.stack === 0;
        pot += posted;
      }
      v.pot = pot; // the first `turn` says what the game counts
      break;
    }
    case "cards":
      if (e.hand === v.hand || v.hand === 0) v.cards = e.cards;
      break;
    case "turn":
      setTurn(v, e.seat, e);
      v.pot = e.pot;
      break;
    case "action": {
      const s = v.seats.get(e.seat);
      if (s !== undefined) {
        s.bet = e.bet;
        s.stack = e.stack;
        if (e.a === "fold") s.folded = true;
        else if (e.stack === 0) s.all_in = true;
      }
      v.pot = e.pot;
      setTurn(v, null);
      break;
    }
    case "street":
      v.street = e.street;
      v.board = e.board;
      v.pot = e.pot;
      for (const s of v.seats.values()) s.bet = 0;
      setTurn(v, null);
      break;
    case "result":
      v.street = "showdown";
      v.board = e.board;
      v.pot = 0;
      for (const s of v.seats.values()) s.bet = 0;
      for (const st of e.stacks) {
        const s = v.seats.get(st.seat);
        if (s !== undefined) s.stack = st.stack;
      }
      setTurn(v, null);
      addResult(v, e);
      break;
    case "sitout":
    case "sitin": {
      const s = v.seats.get(e.seat);
      if (s !== undefined) s.sitting_out = e.t === "sitout";
      break;
    }
    case "rebuy": {
      const s = v.seats.get(e.seat);
      if (s !== undefined) s.stack = e.stack;
      break;
    }
    case "sat": {
      const s = v.seats.get(e.seat);
      if (s !== undefined) s.stack = e.stack;
      else v.seats.set(e.seat, {
        seat: e.seat, user: e.user, stack: e.stack, bet: 0,
        folded: false, all_in: false, sitting_out: false, in_hand: false,
      });
      break;
    }
  }
}

client.on("game", (g: GamePush) => {
  if (view === null || g.table !== view.table) return;
  const e = parseGame(g.data);
  if (e === null) return;
  if (!view.ready) {
    view.queue.push(e);
    return;
  }
  apply(view, e);
  renderTable();
});

client.on("seat", (p: SeatPush) => {
  const v = view;
  if (v === null || p.table !== v.table) return;
  const s = v.seats.get(p.seat);
  if (p.status === "sat") {
    v.seats.set(p.seat, s ?? {
      seat: p.seat, user: p.user, stack: null, bet: 0,
      folded: false, all_in: false, sitting_out: false, in_hand: false,
    });
  } else if (p.status === "left") {
    v.seats.delete(p.seat);
  } else if (s !== undefined) {
    s.away = p.status === "away";
  }
  if (v.ready) renderTable();
});

client.on("unseat", (u) => {
  if (view === null || u.table !== view.table) return;
  void leave(`taken off table ${u.table}: ${u.reason} (${u.code})`, false);
});

// ------------------------------------------------------------------- drawing

const SUITS: Record<string, [string, string]> = { c: ["♣", "clubs"], d: ["♦", "diamonds"], h: ["♥", "hearts"], s: ["♠", "spades"] };
const RANKS: Record<string, string> = { T: "ten", J: "jack", Q: "queen", K: "king", A: "ace" };

function cardEl(card: string): HTMLElement {
  const rank = card.slice(0, 1);
  const [symbol, suitName] = SUITS[card.slice(1, 2)] ?? ["?", "?"];
  const span = el("span", `${rank === "T" ? "10" : rank}${symbol}`, `card suit-${card.slice(1, 2)}`);
  span.setAttribute("role", "img");
  span.setAttribute("aria-label", `${RANKS[rank] ?? rank} of ${suitName}`);
  span.dataset.card = card;
  return span;
}

function drawCards(target: HTMLElement, cards: readonly string[], empty = "—"): void {
  target.replaceChildren(...(cards.length > 0 ? cards.map(cardEl) : [el("span", empty, "status")]));
  target.dataset.cards = cards.join(" ");
}

function seatName(v: View, seat: number): string {
  const user = v.seats.get(seat)?.user;
  const who = seat === v.seat ? "you" : user ? user : "";
  return who ? `seat ${seat} (${who})` : `seat ${seat}`;
}

function seatStatus(v: View, s: SeatState): string {
  const parts: string[] = [];
  if (v.turn === s.seat) parts.push("to act");
  if (s.folded) parts.push("folded");
  else if (s.all_in) parts.push("all-in");
  if (s.sitting_out) parts.push("sitting out");
  if (s.away) parts.push("away");
  if (!s.in_hand && !s.sitting_out && v.street !== "idle") parts.push("waiting");
  return parts.join(", ") || "—";
}

function renderTable(): void {
  const v = view;
  const panel = $("table-panel");
  $("felt").hidden = v === null;
  renderCode(v?.code ?? null);
  if (v === null) {
    $("table-name").textContent = "none: pick one in the lobby";
    delete panel.dataset.table;
    delete panel.dataset.seat;
    stopClock();
    return;
  }
  const entry = lobby.tables.get(v.table);
  $("table-name").textContent = `${v.table}${entry ? ` · ${entry.path}` : ""} · ${v.seat === null ? "watching" : `you are at seat ${v.seat}`}`;
  panel.dataset.table = String(v.table);
  if (v.seat === null) delete panel.dataset.seat;
  else panel.dataset.seat = String(v.seat);
  panel.dataset.hand = String(v.hand);
  panel.dataset.street = v.street;

  $("hand-info").textContent = v.hand === 0 ? "waiting for players" : `hand #${v.hand} · ${v.street}`;
  drawCards($("board"), v.board);
  $("pot").textContent = String(v.pot);

  const tbody = document.querySelector<HTMLTableSectionElement>("#seats tbody")!;
  tbody.replaceChildren(
    ...[...v.seats.values()]
      .sort((a, b) => a.seat - b.seat)
      .map((s) => {
        const tr = el("tr");
        tr.dataset.seat = String(s.seat);
        const classes = [];
        if (s.seat === v.seat) classes.push("me");
        if (s.seat === v.turn) classes.push("turn");
        if (s.folded) classes.push("folded");
        tr.className = classes.join(" ");
        const seatTd = el("td", String(s.seat));
        if (s.seat === v.button) seatTd.append(" ", el("span", "D", "dealer"));
        tr.append(
          seatTd,
          el("td", s.seat === v.seat ? `you${s.user ? ` (${s.user})` : ""}` : s.user || "—"),
          el("td", s.stack === null ? "—" : String(s.stack)),
          el("td", s.bet > 0 ? String(s.bet) : ""),
          el("td", seatStatus(v, s)),
        );
        return tr;
      }),
  );

  drawCards($("my-cards"), v.cards, v.seat === null ? "watching" : "—");
  $("turn").textContent =
    v.turn === null ? (v.street === "showdown" ? "hand over" : "—") : v.turn === v.seat ? "Your turn" : `${seatName(v, v.turn)} to act`;
  renderActions(v);
  if (v.turn !== null && v.deadline > 0) startClock();
  else stopClock();
}

function renderActions(v: View): void {
  const mine = v.seat !== null && v.turn === v.seat && !v.acting;
  const me = v.seat === null ? undefined : v.seats.get(v.seat);
  const call = $<HTMLButtonElement>("act-call");
  call.textContent = v.toCall > 0 && mine ? `Call ${Math.min(v.toCall, me?.stack ?? v.toCall)}` : "Check";
  const canRaise = mine && v.minRaiseTo !== null && v.maxRaiseTo !== null;
  const facingBet = [...v.seats.values()].some((s) => s.bet > 0);
  const raiseTo = $<HTMLInputElement>("raise-to");
  const raise = $<HTMLButtonElement>("act-raise");
  raise.textContent = facingBet ? "Raise to" : "Bet";
  if (canRaise) {
    raiseTo.min = String(v.minRaiseTo);
    raiseTo.max = String(v.maxRaiseTo);
    const n = Number(raiseTo.value);
    if (raiseTo.value === "" || raiseTo.disabled || n < v.minRaiseTo! || n > v.maxRaiseTo!) raiseTo.value = String(v.minRaiseTo);
    raiseTo.title = `${v.minRaiseTo} to ${v.maxRaiseTo}`;
  } else {
    raiseTo.value = "";
    raiseTo.title = "";
  }
  raiseTo.disabled = raise.disabled = !canRaise;
  $<HTMLButtonElement>("act-fold").disabled = !mine;
  call.disabled = !mine;
  $<HTMLButtonElement>("act-allin").disabled = !mine;
  $("stand").textContent = v.seat === null ? "Stop watching" : "Stand up";
  $("actions").dataset.mine = String(mine);
}

let clock: ReturnType<typeof setInterval> | null = null;

function tick(): void {
  const v = view;
  if (v === null || v.turn === null || v.deadline === 0) return stopClock();
  const left = Math.max(0, v.deadline - Date.now());
  $<HTMLProgressElement>("clock").value = v.timeoutMs > 0 ? left / v.timeoutMs : 0;
  $("countdown").textContent = `${(left / 1000).toFixed(1)} s left`;
}

function startClock(): void {
  tick();
  clock ??= setInterval(tick, 100);
}

function stopClock(): void {
  if (clock !== null) clearInterval(clock);
  clock = null;
  $<HTMLProgressElement>("clock").value = 0;
  $("countdown").textContent = "";
}

function addResult(v: View, e: ResultEvent): void {
  const li = el("li");
  li.dataset.hand = String(e.hand);
  const pots = e.pots.map((p, i) => {
    const who = p.winners.map((w) => seatName(v, w)).join(" and ");
    const pot = e.pots.length > 1 ? (i === 0 ? "main pot " : `side pot ${i} `) : "";
    return `${who} ${p.winners.length > 1 ? "split" : "wins"} ${pot}${p.amount}${p.rank ? ` with ${p.rank}` : ""}`;
  });
  li.append(el("b", `Hand #${e.hand}: `), `${pots.join("; ") || "no pot"}.`);
  for (const s of e.shown) {
    li.append(` ${seatName(v, s.seat)} shows `);
    for (const c of s.cards) li.append(cardEl(c));
    li.append(` (${s.rank}).`);
  }
  if (e.returned !== null) li.append(` ${e.returned.amount} returned to ${seatName(v, e.returned.seat)}.`);
  const list = $("results");
  list.prepend(li);
  while (list.children.length > 20) list.lastElementChild?.remove();
  list.dataset.count = String(Number(list.dataset.count ?? 0) + 1);
}

// ------------------------------------------------------------------- acting

async function act(data: unknown): Promise<void> {
  const v = view;
  if (v === null || v.seat === null) return;
  v.acting = true;
  renderActions(v);
  try {
    // Accepted: the buttons stay off until the game's `action` event (which
    // follows the reply) moves the turn on.
    await client.act(v.table, data);
    $("act-error").textContent = "";
  } catch (e) {
    $("act-error").textContent = `refused: ${(e as Error).message}`;
    v.acting = false;
    if (view === v) renderActions(v);
  }
}

$("act-fold").addEventListener("click", () => void act({ a: "fold" }));
$("act-call").addEventListener("click", () => void act({ a: view !== null && view.toCall > 0 ? "call" : "check" }));
$("act-allin").addEventListener("click", () => void act({ a: "allin" }));
$("actions").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const v = view;
  if (v === null || v.minRaiseTo === null || v.maxRaiseTo === null) return;
  const to = Number($<HTMLInputElement>("raise-to").value);
  if (!Number.isInteger(to) || to < v.minRaiseTo || to > v.maxRaiseTo) {
    $("act-error").textContent = `raise to ${v.minRaiseTo} to ${v.maxRaiseTo}`;
    return;
  }
  void act({ a: "raise", to });
});
$("stand").addEventListener("click", () => void leave("", true));

// ------------------------------------------------------------ join and leave

/** Makes `v` the page's table, with an empty list of hands. */
function begin(v: View): void {
  view = v;
  $("act-error").textContent = "";
  $("results").replaceChildren();
  $("results").dataset.count = "0";
}

/** The buy-in typed in, as `sit`'s or `play`'s data (none: the table's default). */
function buyinData(): { data?: unknown } {
  const buyin = $<HTMLInputElement>("buyin").value.trim();
  return buyin === "" ? {} : { data: { buyin: Number(buyin) } };
}

/** Sits at (or watches) `table`, leaving the current table first. */
async function join(table: number, mode: "sit" | "watch"): Promise<void> {
  if (view !== null) await leave("", true);
  const v = newView(table, mode);
  begin(v);
  try {
    await enter(v);
  } catch (e) {
    if (view === v) view = null;
    $("act-error").textContent = `could not ${mode === "sit" ? "sit" : "watch"}: ${(e as Error).message}`;
    renderTable();
    renderLobby();
    return;
  }
  await openChat(table);
}

/** Sends `sit` or `watch` for `v` and applies the snapshot; `returning`
 * after a reconnect, when `sit` takes our seat back (no buy-in then). */
async function enter(v: View, returning = false): Promise<void> {
  v.ready = false;
  v.queue = [];
  renderLobby();
  let snapshot: Uint8Array;
  if (v.mode === "sit") {
    const r = await client.sit(v.table, returning ? {} : buyinData());
    v.seat = r.seat;
    snapshot = r.data;
  } else {
    snapshot = await client.watch(v.table);
  }
  if (view !== v) return;
  show(v, snapshot);
}

/** Applies the snapshot to `v`, then the events that came after it: `early`
 * ones (caught during a `play`) and those queued meanwhile. */
function show(v: View, snapshot: Uint8Array, early: GameEvent[] = []): void {
  const state = parseGame(snapshot);
  if (state !== null) apply(v, state);
  for (const e of [...early, ...v.queue]) apply(v, e);
  v.queue = [];
  v.ready = true;
  renderTable();
  renderLobby();
}

/** Seats the person at a table made on demand (`what` names the attempt in
 * an error), leaving the current table first. */
async function play(options: PlayOptions, what: string): Promise<void> {
  if (view !== null) await leave("", true);
  const buttons = ["play-now", "play-private", "code-join"].map((id) => $<HTMLButtonElement>(id));
  for (const b of buttons) b.disabled = true;
  $("act-error").textContent = "";
  let r: Awaited<ReturnType<typeof playCatching>>;
  try {
    r = await playCatching(client, { ...options, ...buyinData() });
  } catch (e) {
    $("act-error").textContent = `could not ${what}: ${(e as Error).message}`;
    return;
  } finally {
    for (const b of buttons) b.disabled = false;
  }
  const v = newView(r.played.table, "sit");
  v.seat = r.played.seat;
  v.code = r.played.code ?? null;
  begin(v);
  show(v, r.played.data, r.early.map((g) => parseGame(g.data)).filter((e) => e !== null));
  await openChat(v.table);
}

/** Shows the private table's code and share link (hidden for none). */
function renderCode(code: string | null): void {
  $("play-code").hidden = code === null;
  $("code").textContent = code ?? "";
  const link = $<HTMLAnchorElement>("share-link");
  link.href = code === null ? "#" : shareLink(code);
  link.textContent = code === null ? "its link" : link.href;
}

const HOLDEM_PLAY = { game: "holdem", seats: 6 } as const;
$("play-now").addEventListener("click", () => void play(HOLDEM_PLAY, "play"));
$("play-private").addEventListener("click", () => void play({ ...HOLDEM_PLAY, private: true }, "create a private table"));
$("code-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const code = normalizeCode($<HTMLInputElement>("code-input").value);
  if (code !== "") void play({ code }, `join table ${code}`);
});

/** Stands up (or stops watching) when `stand`, and clears the table view. */
async function leave(message: string, stand: boolean): Promise<void> {
  const v = view;
  if (v === null) return;
  view = null;
  if (stand) {
    try {
      await client.stand(v.table);
    } catch (e) {
      if (!(e instanceof ReplyError && e.code === ErrorCode.NotAtTable)) message = `stand: ${(e as Error).message}`;
    }
  }
  await closeChat();
  renderTable();
  renderLobby();
  $("act-error").textContent = message;
}

async function rejoin(): Promise<void> {
  try {
    await loadLobby();
    if (view !== null) await enter(view, true);
  } catch (e) {
    const message = `after reconnecting: ${(e as Error).message}`;
    // Refused, not lost with the connection: the seat is not ours any more
    // (an anonymous seat at a table made by `play` cannot be taken back), so
    // the table goes from the page.
    if (e instanceof ReplyError && view !== null) await leave(message, false);
    else $("act-error").textContent = message;
  }
}

// ------------------------------------------------------------------- chat

interface ChatMessage {
  user: string;
  text: string;
}

let chatChannel: string | null = null;
const messages = new Map<number, ChatMessage>();
const nameInput = $<HTMLInputElement>("chat-name");
nameInput.value = params.get("name") ?? `guest-${Math.random().toString(36).slice(2, 6)}`;

function renderChat(): void {
  const list = $("messages");
  list.replaceChildren(
    ...[...messages.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, m]) => {
        const li = el("li");
        li.append(el("b", `${m.user}: `), m.text);
        return li;
      }),
  );
  list.scrollTop = list.scrollHeight;
}

function onChat(p: Publication): void {
  if (p.channel !== chatChannel) return;
  try {
    const m = p.json<ChatMessage>();
    if (typeof m.user === "string" && typeof m.text === "string") messages.set(p.offset, m);
  } catch {
    return;
  }
  renderChat();
}

async function loadChatHistory(channel: string): Promise<void> {
  try {
    const h = await client.history(channel, { limit: 30 });
    for (const p of h.publications) onChat(p);
  } catch (e) {
    if (!(e instanceof ReplyError && e.code === ErrorCode.NotAvailable)) throw e;
  }
}

function setChatEnabled(on: boolean): void {
  $<HTMLInputElement>("chat-input").disabled = !on;
  $<HTMLButtonElement>("chat-send").disabled = !on;
}

async function openChat(table: number): Promise<void> {
  const channel = `table:${table}`;
  chatChannel = channel;
  messages.clear();
  renderChat();
  $("chat-channel").textContent = `channel ${channel}`;
  try {
    await client.subscribe(channel, {
      onPublication: onChat,
      onResync: () => {
        messages.clear();
        void loadChatHistory(channel).then(renderChat);
      },
    });
    await loadChatHistory(channel);
    setChatEnabled(chatChannel === channel);
    $("chat-error").textContent = "";
  } catch (e) {
    $("chat-error").textContent = `chat unavailable: ${(e as Error).message}`;
  }
}

async function closeChat(): Promise<void> {
  const channel = chatChannel;
  chatChannel = null;
  setChatEnabled(false);
  messages.clear();
  renderChat();
  $("chat-channel").textContent = "—";
  if (channel !== null && client.subscriptions.has(channel)) {
    try {
      await client.unsubscribe(channel);
    } catch {
      // gone already (e.g. the connection dropped): nothing to undo
    }
  }
}

$("chat-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = $<HTMLInputElement>("chat-input");
  const text = input.value.trim();
  if (!text || chatChannel === null) return;
  input.value = "";
  client.publish(chatChannel, { user: nameInput.value || "guest", text }).then(
    () => ($("chat-error").textContent = ""),
    (e: Error) => ($("chat-error").textContent = `not sent: ${e.message}`),
  );
});

// ------------------------------------------------------------------- start

async function main(): Promise<void> {
  await client.connect();
  await loadLobby();
  renderTable();
  document.body.dataset.ready = "true";
  const code = normalizeCode(params.get("code") ?? "");
  if (code !== "") {
    $<HTMLInputElement>("code-input").value = code;
    await play({ code }, `join table ${code}`);
  }
}

main().catch((e: Error) => {
  $("state").textContent = `failed: ${e.message}`;
  if (e instanceof ReplyError && e.code === ErrorCode.NotAvailable) {
    $("lobby-status").textContent = "this server runs no games (start it with [[tables]] in its config)";
    return;
  }
  setTimeout(() => location.reload(), 5000);
});

// For the end-to-end test and the curious: the page's client and lobby.
(window as unknown as { herald: unknown }).herald = { client, lobby, view: () => view };
