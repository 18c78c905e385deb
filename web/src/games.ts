/**
 * The games page served by `herald serve` at `/games.html`: play the
 * scripted game modules (games/, docs/games.md) in a browser. It follows one
 * game's branch of the live lobby, lets a person sit at (or watch) one of
 * its tables and stand up again, and draws the table with a renderer for
 * that kind of game (renderers/): the snapshot first, then each `game`
 * push. Everything goes through the TypeScript SDK, as on the poker page
 * (table.ts), which this page mirrors.
 *
 * Which game: `?game=NAME`, the `[[games]]` name; by default the first
 * scripted game in the lobby (the `game` attribute the engine puts on every
 * table, Hold'em skipped when there is anything else). The page follows the
 * lobby branch `NAME` (a table's default path is `NAME/SEATS-seat/TIMING`),
 * so a table given a `path` of its own elsewhere is not listed.
 *
 * "Play now" (`play`, docs/protocol.md §5f) seats the person at a table of
 * the game with a free seat, or a new one, of the seat count in the box
 * next to it (`?seats=N`, else the first listed table's, else 2).
 *
 * Which renderer, in this order: `?kind=dice|snake|rps|json`; else the game
 * name looked up in `KINDS` (the names games/README.md uses, and the
 * modules' own names); else the snapshot's shape (Liar's Dice's
 * `{"t":"state","bid","players"}`, Snake's `{"t":"board","snakes"}`, RPS's
 * `{"t":"state","score"}`); else `json`, which shows the snapshot and the
 * last messages as JSON and sends an action typed as JSON, for any game.
 */

import { Client, ErrorCode, Lobby, ReplyError, type GamePush, type SeatPush, type TableEntry, type TransportKind } from "herald-client";
import { connectionPanel } from "./panel.js";
import { baseTexts, joinButtons, renderLobbyRows } from "./lobby-table.js";
import { playCatching } from "./play.js";
import { diceRenderer } from "./renderers/dice.js";
import { jsonRenderer } from "./renderers/json.js";
import { isObj, el, type GameContext, type Renderer, type RendererFactory } from "./renderers/kit.js";
import { rpsRenderer } from "./renderers/rps.js";
import { snakeRenderer } from "./renderers/snake.js";

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`#${id} missing`);
  return e as T;
};

const params = new URLSearchParams(location.search);
// SSE can only watch (it sends no commands): a player needs WebSocket or
// long-polling. `?transport=longpoll` forces long-polling.
const transports: TransportKind[] = params.get("transport") === "longpoll" ? ["longpoll"] : ["websocket", "longpoll"];
const client = new Client(new URL(".", location.href).href, { transports, name: "games page" });
const decoder = new TextDecoder();

// ---------------------------------------------------------------- renderers

const RENDERERS: Record<string, RendererFactory> = { dice: diceRenderer, snake: snakeRenderer, rps: rpsRenderer, json: jsonRenderer };

/** Game names (`[[games]] name`) with a renderer of their own. */
const KINDS: Record<string, string> = { dice: "dice", "liars-dice": "dice", snake: "snake", rps: "rps" };

/** The renderer kind for `game`, from the URL, the name, or the snapshot. */
function kindOf(game: string, snapshot: unknown): string {
  const forced = params.get("kind");
  if (forced !== null && forced in RENDERERS) return forced;
  const named = KINDS[game];
  if (named !== undefined) return named;
  if (isObj(snapshot)) {
    if (snapshot.t === "board" && Array.isArray(snapshot.snakes)) return "snake";
    if (snapshot.t === "state" && "bid" in snapshot && Array.isArray(snapshot.players)) return "dice";
    if (snapshot.t === "state" && Array.isArray(snapshot.score)) return "rps";
  }
  return "json";
}

// ------------------------------------------------------------ connection panel

connectionPanel(client, $, () => rejoin());

// ------------------------------------------------------------------- lobby

/** The game shown: `?game=`, or chosen from the lobby in main(). */
let game = params.get("game") ?? "";
let lobby = new Lobby(game);

/** A lobby entry's attrs, parsed (an object; `{}` if unreadable). */
function attrsOf(t: TableEntry): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(decoder.decode(t.attrs));
    return isObj(v) ? v : {};
  } catch {
    return {};
  }
}

/** The attributes worth showing: all but `game`, which the page is about. */
function attrsText(t: TableEntry): string {
  const a = attrsOf(t);
  delete a.game;
  return Object.entries(a)
    .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" · ") || "—";
}

/** The lobby's rows by table id, updated in place so focus survives deltas. */
const lobbyRows = new Map<number, HTMLTableRowElement>();

function lobbyRow(t: TableEntry): HTMLTableRowElement {
  const tr = el("tr");
  tr.dataset.table = String(t.table);
  for (let i = 0; i < 4; i++) tr.append(el("td"));
  const td = el("td", undefined, "lobby-actions");
  if (joinButtons(td, t.table, attrsOf(t), (table, mode) => void join(table, mode)) === 0) td.textContent = "private";
  tr.append(td);
  return tr;
}

function renderLobby(): void {
  renderLobbyRows(
    lobby,
    document.querySelector<HTMLTableSectionElement>("#lobby tbody")!,
    lobbyRows,
    { make: lobbyRow, texts: (t) => [...baseTexts(t), attrsText(t)], current: () => at },
    $("lobby-status"),
  );
}

client.on("lobby_update", (u) => {
  if (lobby.apply(u)) renderLobby();
});

/** Picks the game when the URL did not: the first table's in the whole
 * lobby (by table id), preferring a scripted game to Hold'em. */
async function pickGame(): Promise<string> {
  const { tables } = await client.lobby("");
  await client.lobbyOff("");
  const games = tables.sort((a, b) => a.table - b.table).map((t) => String(attrsOf(t).game ?? t.path.split("/")[0]));
  return games.find((g) => g !== "holdem") ?? games[0] ?? "";
}

async function loadLobby(): Promise<void> {
  lobby.reset(await client.lobby(game));
  renderLobby();
}

// ------------------------------------------------------------------- table

interface At {
  table: number;
  mode: "sit" | "watch";
  /** Our seat, when sitting. */
  seat: number | null;
  /** Null until the snapshot is applied; messages wait in `queue` meanwhile. */
  renderer: Renderer | null;
  queue: unknown[];
}

let at: At | null = null;
/** Every game message received at the current table, in order, for tests. */
let received: unknown[] = [];

function parse(data: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(data));
  } catch {
    return decoder.decode(data);
  }
}

function showError(message: string): void {
  $("act-error").textContent = message;
}

client.on("game", (g: GamePush) => {
  const a = at;
  if (a === null || g.table !== a.table) return;
  const m = parse(g.data);
  received.push(m);
  if (a.renderer === null) a.queue.push(m);
  else a.renderer.message(m);
});

client.on("seat", (p: SeatPush) => {
  if (at === null || p.table !== at.table) return;
  at.renderer?.seat?.(p);
});

client.on("unseat", (u) => {
  if (at === null || u.table !== at.table) return;
  void leave(`taken off table ${u.table}: ${u.reason} (${u.code})`, false);
});

function contextFor(a: At): GameContext {
  return {
    get seat() {
      return a.seat;
    },
    async act(data) {
      if (at !== a || a.seat === null) return false;
      try {
        await client.act(a.table, data);
        if (at === a) showError("");
        return true;
      } catch (e) {
        if (at === a) showError(`refused: ${(e as Error).message}`);
        return false;
      }
    },
  };
}

function renderHeader(): void {
  const a = at;
  const panel = $("game-panel");
  $("stand").hidden = a === null;
  if (a === null) {
    $("table-name").textContent = "none: pick one in the lobby";
    delete panel.dataset.table;
    delete panel.dataset.seat;
    delete panel.dataset.kind;
    return;
  }
  const entry = lobby.tables.get(a.table);
  $("table-name").textContent = `${a.table}${entry ? ` · ${entry.path}` : ""} · ${a.seat === null ? "watching" : `you are at seat ${a.seat}`}`;
  $("stand").textContent = a.seat === null ? "Stop watching" : "Stand up";
  panel.dataset.table = String(a.table);
  if (a.seat === null) delete panel.dataset.seat;
  else panel.dataset.seat = String(a.seat);
}

/** Sits at (or watches) `table`, leaving the current table first. */
async function join(table: number, mode: "sit" | "watch"): Promise<void> {
  if (at !== null) await leave("", true);
  const a: At = { table, mode, seat: null, renderer: null, queue: [] };
  at = a;
  received = [];
  showError("");
  try {
    await enter(a);
  } catch (e) {
    if (at === a) at = null;
    showError(`could not ${mode}: ${(e as Error).message}`);
    renderHeader();
    renderLobby();
  }
}

/** Sends `sit` or `watch` for `a`, then draws its snapshot with a fresh
 * renderer and the messages that came meanwhile; after a reconnect `sit`
 * takes our seat back. */
async function enter(a: At): Promise<void> {
  a.renderer?.destroy();
  a.renderer = null;
  a.queue = [];
  renderHeader();
  renderLobby();
  let data: Uint8Array;
  if (a.mode === "sit") {
    const r = await client.sit(a.table);
    a.seat = r.seat;
    data = r.data;
  } else {
    data = await client.watch(a.table);
  }
  if (at !== a) return;
  draw(a, data);
}

/** Draws `a`'s snapshot with a fresh renderer, then the messages after it:
 * `early` ones (caught during a `play`) and those queued meanwhile. */
function draw(a: At, data: Uint8Array, early: unknown[] = []): void {
  const snapshot = parse(data);
  const kind = kindOf(game, snapshot);
  const root = $("game-view");
  root.replaceChildren();
  root.dataset.kind = kind;
  $("game-panel").dataset.kind = kind;
  const r = RENDERERS[kind]!(root, contextFor(a));
  r.snapshot(snapshot);
  for (const m of [...early, ...a.queue]) r.message(m);
  a.queue = [];
  a.renderer = r;
  renderHeader();
  renderLobby();
}

/** Stands up (or stops watching) when `stand`, and clears the table. */
async function leave(message: string, stand: boolean): Promise<void> {
  const a = at;
  if (a === null) return;
  at = null;
  a.renderer?.destroy();
  $("game-view").replaceChildren();
  delete $("game-view").dataset.kind;
  if (stand) {
    try {
      await client.stand(a.table);
    } catch (e) {
      if (!(e instanceof ReplyError && e.code === ErrorCode.NotAtTable)) message = `stand: ${(e as Error).message}`;
    }
  }
  renderHeader();
  renderLobby();
  showError(message);
}

$("stand").addEventListener("click", () => void leave("", true));

/** Seats the person at a table of the game made on demand, leaving the
 * current table first. */
async function play(): Promise<void> {
  if (at !== null) await leave("", true);
  const button = $<HTMLButtonElement>("play-now");
  button.disabled = true;
  showError("");
  let r: Awaited<ReturnType<typeof playCatching>>;
  try {
    r = await playCatching(client, { game, seats: Number($<HTMLInputElement>("play-seats").value) });
  } catch (e) {
    showError(`could not play: ${(e as Error).message}`);
    return;
  } finally {
    button.disabled = false;
  }
  const a: At = { table: r.played.table, mode: "sit", seat: r.played.seat, renderer: null, queue: [] };
  at = a;
  received = r.early.map((g) => parse(g.data));
  draw(a, r.played.data, [...received]);
}

$("play-now").addEventListener("click", () => void play());

async function rejoin(): Promise<void> {
  try {
    await loadLobby();
    if (at !== null) await enter(at);
  } catch (e) {
    const message = `after reconnecting: ${(e as Error).message}`;
    // Refused, not lost with the connection: the seat is not ours any more
    // (as table.ts's rejoin), so the table goes from the page.
    if (e instanceof ReplyError && at !== null) await leave(message, false);
    else showError(message);
  }
}

// ------------------------------------------------------------------- start

async function main(): Promise<void> {
  await client.connect();
  if (game === "") {
    game = await pickGame();
    lobby = new Lobby(game);
  }
  $("game-name").textContent = game || "no game";
  $("lobby-branch").textContent = `branch "${game}": snapshot, then deltas`;
  document.title = `Herald games: ${game}`;
  await loadLobby();
  const seats = $<HTMLInputElement>("play-seats");
  const first = [...lobby.tables.values()].sort((x, y) => x.table - y.table)[0];
  seats.value = params.get("seats") ?? String(first?.seats ?? 2);
  renderHeader();
  document.body.dataset.game = game;
  document.body.dataset.ready = "true";
}

main().catch((e: Error) => {
  $("state").textContent = `failed: ${e.message}`;
  if (e instanceof ReplyError && e.code === ErrorCode.NotAvailable) {
    $("lobby-status").textContent = "this server runs no games (start it with [[games]] and [[tables]] in its config)";
    return;
  }
  setTimeout(() => location.reload(), 5000);
});

// For the end-to-end test and the curious: the page's client, lobby, table,
// and the game messages received at it.
(window as unknown as { herald: unknown }).herald = { client, lobby: () => lobby, at: () => at, received: () => received };
