/**
 * The demo page served by `herald serve` at `/`: a live table and chart of
 * the server's synthetic stream (`herald serve --demo-rate N` publishes rows
 * of seed 002's shape to `demo.stream`), a chat room with presence on
 * `demo.chat`, and a panel showing the transport in use. Everything goes
 * through the TypeScript SDK; `?transport=sse|longpoll|websocket` forces one
 * transport and `?encoding=binary` the binary encoding.
 */

import { Client, ErrorCode, ReplyError, type Position, type Publication, type TransportKind } from "herald-client";

const STREAM = "demo.stream";
const CHAT = "demo.chat";
const MAX_ROWS = 20;
const MAX_POINTS = 120;

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`#${id} missing`);
  return el as T;
};

const params = new URLSearchParams(location.search);
const forced = params.get("transport");
const transports: TransportKind[] | undefined =
  forced === "websocket" || forced === "sse" || forced === "longpoll" ? [forced] : undefined;
const encoding = params.get("encoding") === "binary" ? "binary" : "json";

const client = new Client(new URL(".", location.href).href, { transports, encoding, name: "demo page" });

// ------------------------------------------------------------ transport panel

let reconnects = 0;
client.on("state", (s) => ($("state").textContent = s));
client.on("connected", (info) => {
  $("transport").textContent = info.transport;
  $("encoding").textContent = info.transport === "websocket" ? encoding : "json";
  $("client-id").textContent = info.client;
  void refreshPresence();
});
client.on("disconnected", () => ($("reconnects").textContent = String(++reconnects)));
client.on("closed", (e) => {
  $("state").textContent = `closed${e ? `: ${e.message}` : ""}`;
});

// ------------------------------------------------------------ stream + chart

interface Row {
  seq: number;
  time: string;
  car: string;
  lon: number;
  lat: number;
  speed: number;
  gas: number;
}

let rowsReceived = 0;
// Rows carry consecutive `seq` numbers: a jump is a lost row. Recovery after
// a reconnect keeps this at 0; only a reported resync (e.g. the server
// restarted) restarts the count from the next row.
let lastSeq = 0;
let gaps = 0;
let resyncs = 0;
let pointsDrawn = 0;
const speeds: number[] = [];
const recent: number[] = [];
const tbody = document.querySelector<HTMLTableSectionElement>("#rows tbody")!;
const line = document.getElementById("line") as unknown as SVGPolylineElement;

function onRow(p: Publication): void {
  let row: Row;
  try {
    row = p.json<Row>();
  } catch {
    return;
  }
  rowsReceived++;
  if (lastSeq !== 0 && row.seq !== lastSeq + 1) gaps++;
  lastSeq = row.seq;
  const tr = document.createElement("tr");
  for (const v of [row.seq, row.time.slice(11, 23), row.car, row.lon.toFixed(5), row.lat.toFixed(5), row.speed, row.gas.toFixed(1)]) {
    const td = document.createElement("td");
    td.textContent = String(v);
    tr.append(td);
  }
  tbody.prepend(tr);
  while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(-1);
  const status = $("stream-status");
  status.textContent = `${rowsReceived} rows received · offset ${p.offset} · ${gaps} lost · ${resyncs} resyncs`;
  status.dataset.rows = String(rowsReceived);
  status.dataset.gaps = String(gaps);
  // Each row is one car: chart the mean of the last ten rows (the fleet).
  recent.push(row.speed);
  if (recent.length > 10) recent.shift();
  speeds.push(recent.reduce((a, b) => a + b, 0) / recent.length);
  pointsDrawn++;
  if (speeds.length > MAX_POINTS) speeds.shift();
  drawChart();
}

function drawChart(): void {
  const step = 600 / (MAX_POINTS - 1);
  line.setAttribute(
    "points",
    speeds.map((v, i) => `${(i * step).toFixed(1)},${(200 - Math.max(0, Math.min(200, v))).toFixed(1)}`).join(" "),
  );
  line.dataset.count = String(speeds.length);
  line.dataset.total = String(pointsDrawn);
}

// ------------------------------------------------------------------- chat

interface ChatMessage {
  user: string;
  text: string;
}

const messages = new Map<number, ChatMessage>();
const nameInput = $<HTMLInputElement>("chat-name");
nameInput.value = params.get("name") ?? `guest-${Math.random().toString(36).slice(2, 6)}`;

function renderChat(): void {
  const list = $("messages");
  list.replaceChildren(
    ...[...messages.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, m]) => {
        const li = document.createElement("li");
        const who = document.createElement("b");
        who.textContent = `${m.user}: `;
        li.append(who, document.createTextNode(m.text));
        return li;
      }),
  );
  list.scrollTop = list.scrollHeight;
}

function onChat(p: Publication): void {
  try {
    const m = p.json<ChatMessage>();
    if (typeof m.user === "string" && typeof m.text === "string") messages.set(p.offset, m);
  } catch {
    return;
  }
  renderChat();
}

async function loadChatHistory(): Promise<void> {
  try {
    const h = await client.history(CHAT, { limit: 20 });
    for (const p of h.publications) onChat(p);
  } catch (e) {
    if (!(e instanceof ReplyError && e.code === ErrorCode.NotAvailable)) throw e;
  }
}

async function refreshPresence(): Promise<void> {
  if (!client.subscriptions.has(CHAT)) return;
  try {
    const members = await client.presence(CHAT);
    $("presence").textContent = `${members.length} connection${members.length === 1 ? "" : "s"}: ${members.map((m) => m.client).join(", ")}`;
  } catch (e) {
    if (e instanceof ReplyError && e.code === ErrorCode.NotAvailable) {
      $("presence").textContent = `not available over ${client.transportKind}`;
    }
  }
}

$("chat-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = $<HTMLInputElement>("chat-input");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  client.publish(CHAT, { user: nameInput.value || "guest", text }).then(
    () => ($("chat-error").textContent = ""),
    (e: Error) => ($("chat-error").textContent = `not sent: ${e.message}`),
  );
});

// ------------------------------------------------------------------- start

async function main(): Promise<void> {
  await client.connect();
  // Start the table and chart with the stream's recent rows: learn its
  // position, then subscribe from up to MAX_POINTS rows before it (what the
  // server still retains arrives first, then live rows, without a gap).
  let since: Position | undefined;
  try {
    const top = await client.history(STREAM, { limit: 1 });
    if (top.epoch) since = { epoch: top.epoch, offset: Math.max(0, top.offset - MAX_POINTS) };
  } catch (e) {
    if (!(e instanceof ReplyError && e.code === ErrorCode.NotAvailable)) throw e;
  }
  await client.subscribe(STREAM, {
    onPublication: onRow,
    since,
    onResync: (r) => {
      // Rows may be missing (or the stream restarted): say so, and start
      // checking continuity afresh. The first subscribe from `since` may
      // find older rows already gone; that is not a resync of a live view.
      if (!r.resubscribed) return;
      resyncs++;
      lastSeq = 0;
    },
  });
  setTimeout(() => {
    if (rowsReceived === 0) $("stream-status").textContent = "no rows yet: is the server running with --demo-rate?";
  }, 3000);
  await client.subscribe(CHAT, {
    joinLeave: true,
    onPublication: onChat,
    onJoin: () => void refreshPresence(),
    onLeave: () => void refreshPresence(),
    onResync: () => {
      messages.clear();
      void loadChatHistory().then(renderChat);
    },
  });
  await loadChatHistory();
  await refreshPresence();
  document.body.dataset.ready = "true";
}

main().catch((e: Error) => {
  $("state").textContent = `failed: ${e.message}`;
  setTimeout(() => location.reload(), 5000);
});

// For the end-to-end test and the curious: the page's client.
(window as unknown as { herald: unknown }).herald = { client };
