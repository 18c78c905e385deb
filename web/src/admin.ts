// The admin dashboard at /admin (served by `herald serve` when `[admin]`
// configures a credential; crates/server/src/admin/). Logs in with a
// session cookie the page never sees (HttpOnly), keeps the session's CSRF
// token in memory and sends it on every action. The pages are live: an
// EventSource on /admin/api/live brings every node's counters each second,
// and rates, p99 fan-out latency and the charts are computed here from two
// samples (decision 0019); the stream's query names the open detail view
// (a channel, a table, a connections search), whose fresh data comes with
// each tick, and it is reopened when that view changes. Everything shown
// is written with textContent.

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

let csrf = "";
let live: EventSource | null = null;
/** The query of the open stream ("" for nodes only). */
let liveQuery = "";
/** Each tab's open detail view, as a live stream query. */
const openViews: Record<string, string> = {};
let currentTab = "nodes";

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing`);
  return el as T;
};

function el(tag: string, text?: string | number, attrs: Record<string, string> = {}): HTMLElement {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function row(cells: (string | number | HTMLElement)[]): HTMLTableRowElement {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof HTMLElement) td.append(c);
    else td.textContent = String(c);
    tr.append(td);
  }
  return tr;
}

async function getJson(path: string): Promise<{ status: number; body: Json }> {
  const r = await fetch(path, { credentials: "same-origin" });
  if (r.status === 401) {
    showLogin();
    throw new Error("logged out");
  }
  return { status: r.status, body: await r.json().catch(() => null) };
}

async function act(path: string, body: Json): Promise<{ status: number; body: Json }> {
  const r = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", "x-csrf-token": csrf },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json().catch(() => null) };
}

// ---- login ----

function showLogin(): void {
  live?.close();
  live = null;
  csrf = "";
  liveQuery = "";
  for (const k of Object.keys(openViews)) delete openViews[k];
  $("login").hidden = false;
  $("tabs").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  for (const p of document.querySelectorAll<HTMLElement>(".page")) p.hidden = true;
}

function showApp(user: string, token: string): void {
  csrf = token;
  $("login").hidden = true;
  $("tabs").hidden = false;
  $("logout").hidden = false;
  $("who").textContent = `signed in as ${user}`;
  tab("nodes"); // opens the live stream
}

async function login(ev: Event): Promise<void> {
  ev.preventDefault();
  const r = await fetch("/admin/login", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ user: $<HTMLInputElement>("user").value, password: $<HTMLInputElement>("password").value }),
  });
  const body = await r.json().catch(() => ({}));
  if (r.status === 200) {
    $<HTMLInputElement>("password").value = "";
    $("login-error").textContent = "";
    showApp(body.user, body.csrf);
  } else {
    $("login-error").textContent = body?.error ?? `refused (${r.status})`;
  }
}

// ---- tabs ----

function tab(name: string): void {
  for (const b of document.querySelectorAll<HTMLButtonElement>("#tabs button")) {
    b.classList.toggle("on", b.dataset.tab === name);
  }
  for (const p of document.querySelectorAll<HTMLElement>(".page")) p.hidden = p.id !== name;
  currentTab = name;
  follow();
  if (name === "tables") void loadTables();
  if (name === "pusher") void loadPusher();
}

// ---- nodes (live) ----

interface Sample {
  at: number;
  publications: number;
  delivered: number;
  fanout: number[];
}

const last = new Map<string, Sample>();
const HISTORY = 300; // one point a second: five minutes
const series = { msgs: [] as number[], conns: [] as number[], p99: [] as number[] };

/** The p99 (seconds) of the fan-outs between two cumulative bucket counts. */
function p99(before: number[], now: number[], bounds: number[]): number | null {
  const total = (now[now.length - 1] ?? 0) - (before[before.length - 1] ?? 0);
  if (total <= 0) return null;
  for (let i = 0; i < now.length; i++) {
    if ((now[i] ?? 0) - (before[i] ?? 0) >= 0.99 * total) return bounds[i] ?? bounds[bounds.length - 1] ?? null;
  }
  return bounds[bounds.length - 1] ?? null;
}

function fmtBytes(n: number): string {
  return n > 1 << 30 ? `${(n / (1 << 30)).toFixed(1)} GiB` : `${(n / (1 << 20)).toFixed(1)} MiB`;
}

function fmtUptime(s: number): string {
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${m}m` : `${m}m ${s % 60}s`;
}

function onNodes(snap: Json): void {
  $("live-state").textContent = "connected";
  $("live-at").textContent = new Date(snap.at_ms).toLocaleTimeString();
  const tbody = $("node-table").querySelector("tbody")!;
  tbody.replaceChildren();
  let msgs = 0;
  let conns = 0;
  let worst = 0;
  for (const n of snap.nodes as Json[]) {
    const s = n.stats ?? {};
    const id = n.id || "this node";
    const prev = last.get(id);
    let pubRate: number | null = null;
    let delRate: number | null = null;
    let lat: number | null = null;
    if (prev && s.at_ms > prev.at) {
      const dt = (s.at_ms - prev.at) / 1000;
      pubRate = (s.publications - prev.publications) / dt;
      delRate = (s.delivered - prev.delivered) / dt;
      lat = p99(prev.fanout, s.fanout ?? [], snap.fanout_le);
    }
    if (!prev || s.at_ms > prev.at) {
      last.set(id, { at: s.at_ms, publications: s.publications, delivered: s.delivered, fanout: s.fanout ?? [] });
    }
    msgs += pubRate ?? 0;
    conns += s.clients ?? 0;
    worst = Math.max(worst, lat ?? 0);
    const transports = Object.entries(s.transports ?? {})
      .filter(([, v]) => (v as number) > 0)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ") || "none";
    const redis = el("span", s.redis ?? "?", { class: s.redis === "down" ? "down" : "" });
    const tr = row([
      `${id}${n.self ? " (this)" : ""}`,
      s.role ?? "",
      s.version ?? "",
      fmtUptime(s.uptime_s ?? 0),
      `${s.clients ?? 0}: ${transports}`,
      s.channels ?? 0,
      s.tables ?? 0,
      pubRate === null ? "…" : pubRate.toFixed(1),
      delRate === null ? "…" : delRate.toFixed(1),
      lat === null ? "–" : `≤ ${(lat * 1000).toFixed(3)} ms`,
      fmtBytes(s.memory_bytes ?? 0),
      redis,
    ]);
    tr.dataset.node = id;
    tr.dataset.publications = String(s.publications ?? 0);
    tbody.append(tr);
  }
  push(series.msgs, msgs);
  push(series.conns, conns);
  push(series.p99, worst * 1000);
  draw("chart-msgs", series.msgs);
  draw("chart-conns", series.conns);
  draw("chart-p99", series.p99);
}

function push(a: number[], v: number): void {
  a.push(v);
  if (a.length > HISTORY) a.shift();
}

function draw(id: string, points: number[]): void {
  const c = $<HTMLCanvasElement>(id);
  const g = c.getContext("2d");
  if (!g) return;
  g.clearRect(0, 0, c.width, c.height);
  const max = Math.max(1, ...points);
  g.fillStyle = "#556";
  g.font = "11px sans-serif";
  g.fillText(max.toFixed(max < 10 ? 2 : 0), 2, 11);
  g.fillText(`now ${(points[points.length - 1] ?? 0).toFixed(1)}`, c.width - 70, 11);
  g.strokeStyle = "#2f7de1";
  g.lineWidth = 1.5;
  g.beginPath();
  points.forEach((v, i) => {
    const x = (i / (HISTORY - 1)) * c.width;
    const y = c.height - 2 - (v / max) * (c.height - 16);
    if (i === 0) g.moveTo(x, y);
    else g.lineTo(x, y);
  });
  g.stroke();
  c.dataset.points = String(points.length);
}

/** Opens `tab`'s detail view `query` and has the stream follow it. */
function openView(tabName: string, query: string): void {
  openViews[tabName] = query;
  follow();
}

/** (Re)opens the stream when the shown tab's open view changed. */
function follow(): void {
  if (!csrf) return;
  const want = openViews[currentTab] ?? "";
  if (live && want === liveQuery) return;
  liveQuery = want;
  startLive();
}

function startLive(): void {
  live?.close();
  live = new EventSource(`/admin/api/live${liveQuery ? `?${liveQuery}` : ""}`);
  live.addEventListener("nodes", (e) => onNodes(JSON.parse((e as MessageEvent).data)));
  live.addEventListener("channel", (e) => renderChannel(JSON.parse((e as MessageEvent).data)));
  live.addEventListener("table", (e) => renderTable(JSON.parse((e as MessageEvent).data)));
  live.addEventListener("connections", (e) => renderConnections(200, JSON.parse((e as MessageEvent).data)));
  live.onerror = async () => {
    $("live-state").textContent = "reconnecting";
    // A stream ended by logout or expiry: the session check says which.
    const r = await fetch("/admin/api/session", { credentials: "same-origin" });
    if (r.status === 401) showLogin();
  };
}

// ---- channels ----

async function searchChannels(ev?: Event): Promise<void> {
  ev?.preventDefault();
  const q = $<HTMLInputElement>("channel-q").value;
  const { body } = await getJson(`/admin/api/channels?q=${encodeURIComponent(q)}`);
  const tbody = $("channel-list").querySelector("tbody")!;
  tbody.replaceChildren();
  for (const c of body.channels as Json[]) {
    const a = el("a", c.channel, { href: "#" });
    a.addEventListener("click", (e) => {
      e.preventDefault();
      void showChannel(c.channel);
    });
    tbody.append(row([a, c.subscribers]));
  }
  if (body.truncated) tbody.append(row([`… ${body.total - body.channels.length} more`, ""]));
}

async function showChannel(name: string): Promise<void> {
  openView("channels", `channel=${encodeURIComponent(name)}`);
  const { body } = await getJson(`/admin/api/channel?name=${encodeURIComponent(name)}`);
  renderChannel(body);
  $<HTMLInputElement>("publish-channel").value = name;
}

/** A channel's detail (from a click, then from every tick of the stream). */
function renderChannel(body: Json): void {
  if (openViews.channels !== `channel=${encodeURIComponent(body.channel)}`) return;
  const name = body.channel;
  const d = $("channel-detail");
  d.replaceChildren(el("h2", name), el("p", `${body.subscribers} subscriber(s) on this node`));
  d.append(el("h3", "Presence"));
  const members = Array.isArray(body.presence) ? body.presence : [];
  d.append(el("p", members.length ? members.map((m: Json) => `${m.user || "(anonymous)"} [${m.client}]`).join(", ") : "nobody"));
  d.append(el("h3", "Recent history"));
  const items = body.history?.items ?? [];
  const t = el("table");
  t.append(row(["offset", "data"]));
  for (const h of items) t.append(row([h.offset, h.data]));
  d.append(items.length ? t : el("p", body.history?.error ?? "none kept"));
}

async function publish(ev: Event): Promise<void> {
  ev.preventDefault();
  const out = $("publish-result");
  let data: Json;
  try {
    data = JSON.parse($<HTMLTextAreaElement>("publish-data").value);
  } catch {
    out.textContent = "the data must be JSON";
    return;
  }
  const channel = $<HTMLInputElement>("publish-channel").value;
  const r = await act("/admin/api/publish", { channel, data });
  out.textContent = r.status === 200 ? `published at offset ${r.body.offset}` : `refused: ${r.body?.error ?? r.status}`;
}

// ---- connections ----

async function findConnections(ev?: Event): Promise<void> {
  ev?.preventDefault();
  const user = $<HTMLInputElement>("conn-user").value.trim();
  const client = $<HTMLInputElement>("conn-client").value.trim();
  const q = client ? `client=${encodeURIComponent(client)}` : `user=${encodeURIComponent(user)}`;
  const { status, body } = await getJson(`/admin/api/connections?${q}`);
  if (status === 200) openView("connections", q);
  renderConnections(status, body);
}

/** Connection rows by client id: kept across ticks, so that a code being
 * typed next to Disconnect survives the refresh. */
const connRows = new Map<string, HTMLTableRowElement>();

function renderConnections(status: number, body: Json): void {
  const tbody = $("conn-list").querySelector("tbody")!;
  if (status !== 200) {
    tbody.replaceChildren();
    connRows.clear();
    $("conn-result").textContent = body?.error ?? `refused (${status})`;
    return;
  }
  $("conn-result").textContent = `${body.connections.length} connection(s)`;
  const seen = new Set<string>();
  for (const c of body.connections as Json[]) {
    seen.add(c.client);
    const cells = [c.client, c.user || "(anonymous)", c.kind, c.encoding, `${c.idle_s}s`, (c.subscriptions as string[]).join(", ")];
    const old = connRows.get(c.client);
    if (old) {
      cells.forEach((v, i) => {
        const td = old.cells[i];
        if (td) td.textContent = String(v);
      });
      continue;
    }
    const code = el("input", undefined, { type: "number", value: "4000", min: "3000", max: "4999", class: "code" }) as HTMLInputElement;
    const button = el("button", "Disconnect", { class: "disconnect" });
    button.addEventListener("click", async () => {
      const r = await act("/admin/api/disconnect", { client: c.client, code: Number(code.value) });
      $("conn-result").textContent =
        r.status === 200 ? `client ${c.client} disconnected with ${r.body.code}` : `refused: ${r.body?.error ?? r.status}`;
    });
    const cell = el("span");
    cell.append(code, button);
    const tr = row([...cells, cell]);
    connRows.set(c.client, tr);
    tbody.append(tr);
  }
  for (const [id, tr] of connRows) {
    if (!seen.has(id)) {
      tr.remove();
      connRows.delete(id);
    }
  }
}

// ---- tables ----

async function loadTables(): Promise<void> {
  const { body } = await getJson("/admin/api/tables");
  const tbody = $("table-list").querySelector("tbody")!;
  tbody.replaceChildren();
  for (const t of body.tables as Json[]) {
    const show = el("a", `#${t.table}`, { href: "#" });
    show.addEventListener("click", async (e) => {
      e.preventDefault();
      openView("tables", `table=${t.table}`);
      const r = await getJson(`/admin/api/table?id=${t.table}`);
      renderTable({ table: t.table, state: r.body });
    });
    const close = el("button", "Close");
    close.addEventListener("click", async () => {
      if (!confirm(`Close table ${t.table}?`)) return;
      if (openViews.tables === `table=${t.table}`) openView("tables", "");
      const r = await act("/admin/api/close-table", { id: t.table });
      $("table-state").textContent = r.status < 300 ? `table ${t.table} closed` : `refused: ${r.body?.error?.message ?? r.body?.error ?? r.status}`;
      void loadTables();
    });
    tbody.append(row([show, t.attrs?.game ?? t.path ?? "", `${t.players ?? 0}/${t.seats ?? "?"}`, t.owner?.node ?? "–", t.owner?.token ?? "–", close]));
  }
}

/** The open table's state (from a click, then from every tick). */
function renderTable(body: Json): void {
  if (openViews.tables !== `table=${body.table}`) return;
  $("table-state").textContent = body.state ? JSON.stringify(body.state, null, 2) : `table ${body.table}: ${body.error}`;
}

// ---- pusher ----

async function loadPusher(): Promise<void> {
  const { body } = await getJson("/admin/api/pusher");
  const box = $("pusher-apps");
  box.replaceChildren();
  if (!body.apps.length) box.append(el("p", "No Pusher apps configured."));
  for (const a of body.apps as Json[]) {
    box.append(el("h2", `App ${a.id} (key ${a.key}, namespace ${a.namespace})`));
    box.append(el("p", `${a.connections} connection(s) on this node`));
    const t = el("table");
    t.append(row(["channel", "subscribers here"]));
    for (const c of a.channels as Json[]) t.append(row([c.channel, c.subscribers]));
    box.append(t);
  }
}

// ---- start ----

async function start(): Promise<void> {
  $("login-form").addEventListener("submit", (e) => void login(e));
  $("logout").addEventListener("click", async () => {
    await act("/admin/logout", {});
    showLogin();
  });
  for (const b of document.querySelectorAll<HTMLButtonElement>("#tabs button")) {
    b.addEventListener("click", () => tab(b.dataset.tab ?? "nodes"));
  }
  $("channel-search").addEventListener("submit", (e) => void searchChannels(e));
  $("publish-form").addEventListener("submit", (e) => void publish(e));
  $("conn-search").addEventListener("submit", (e) => void findConnections(e));
  $("tables-refresh").addEventListener("click", () => void loadTables());
  $("pusher-refresh").addEventListener("click", () => void loadPusher());
  const r = await fetch("/admin/api/session", { credentials: "same-origin" });
  if (r.status === 200) {
    const s = await r.json();
    showApp(s.user, s.csrf);
  } else {
    showLogin();
  }
}

void start();
