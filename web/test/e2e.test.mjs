// End-to-end: the demo page served by a real `herald serve --demo-rate`, in
// headless Chromium (Debian's `chromium`, driven by playwright-core), with a
// Python peer using the Python SDK. Rows and chart points must arrive, a
// chat message sent from the page must reach the Python client (and one from
// Python the page), and all of it must still work when WebSocket is blocked
// (automatic fallback to SSE) and when long-polling is forced. Screenshots go
// to web/artifacts/ (or $HERALD_ARTIFACTS).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Proxy, Server } from "../../sdk/typescript/test/helpers.mjs";
import { ARTIFACTS, launchBrowser } from "./browser.mjs";

const WEB = fileURLToPath(new URL("..", import.meta.url));
const PYTHON = process.env.HERALD_E2E_PYTHON ?? join(WEB, ".venv", "bin", "python");

const server = new Server(["--demo-rate", "20"]);
let context;
let browser;
let peer;

/** The Python peer: lines it printed, and a way to make it publish. */
function startPeer() {
  const proc = spawn(PYTHON, [join(WEB, "test", "chat_peer.py"), server.wsUrl, "demo.chat"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = [];
  createInterface({ input: proc.stdout }).on("line", (l) => lines.push(l));
  return {
    proc,
    lines,
    publish: (v) => proc.stdin.write(`${JSON.stringify(v)}\n`),
    received: () => lines.filter((l) => l !== "ready").map((l) => JSON.parse(l).data),
  };
}

async function waitFor(cond, what, timeout = 20_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  if (!existsSync(PYTHON)) throw new Error(`no Python with the SDK at ${PYTHON}: see sdk/typescript/test.sh`);
  await server.start();
  peer = startPeer();
  await waitFor(() => peer.lines.includes("ready"), "the Python peer");
  browser = await launchBrowser(1280, 860);
  context = browser.context;
});

after(async () => {
  await browser?.close();
  if (peer) {
    peer.proc.stdin.end();
    peer.proc.kill();
  }
  await server.stop();
});

/** Opens the page and checks the whole demo on whatever transport it uses. */
async function exercise(page, path, expectedTransport, shot) {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  await page.goto(`${server.url}${path}`);
  await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 });
  assert.equal(await page.textContent("#transport"), expectedTransport);
  assert.equal(await page.textContent("#state"), "connected");

  // Rows and chart points arrive, and keep arriving.
  await page.waitForFunction(() => document.querySelectorAll("#rows tbody tr").length >= 5, null, { timeout: 20_000 });
  const chart = () => page.evaluate(() => ({ ...document.getElementById("line").dataset }));
  const { count: points, total } = await chart();
  assert.ok(Number(points) >= 5, `chart points: ${points}`);
  await waitFor(async () => Number((await chart()).total) >= Number(total) + 5, "more chart points");
  const seqs = await page.$$eval("#rows tbody tr td:first-child", (tds) => tds.map((td) => Number(td.textContent)));
  for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i - 1], seqs[i] + 1, `rows in order, none missing: ${seqs}`);
  const polyline = await page.getAttribute("#line", "points");
  assert.ok(polyline.split(" ").length >= Number(points), polyline);

  // A chat message from the page reaches the Python client...
  const text = `hello from chromium over ${expectedTransport} ${Math.random().toString(36).slice(2)}`;
  await page.fill("#chat-input", text);
  await page.click("#chat-send");
  await waitFor(() => peer.received().some((m) => m.text === text), "the page's message in Python");
  // ...and one from Python reaches the page.
  // (Both texts are unique to this call: two tests run over "websocket", and
  // the page loads the chat's history, so a fixed reply could already be
  // there. The page's own message and Python's copy are separate deliveries
  // in no set order, so the page's is waited for, not assumed.)
  const reply = `hi from python to ${text}`;
  peer.publish({ user: "python", text: reply });
  await page.waitForFunction((t) => document.getElementById("messages").textContent.includes(t), reply, { timeout: 20_000 });
  await page.waitForFunction((t) => document.getElementById("messages").textContent.includes(t), text, { timeout: 20_000 });

  await page.screenshot({ path: join(ARTIFACTS, shot), fullPage: true });
  assert.deepEqual(errors, []);
}

test("the demo over WebSocket: stream, chart, chat with a Python client, presence", async () => {
  const page = await context.newPage();
  try {
    await exercise(page, "/", "websocket", "demo-websocket.png");
    // Presence lists the page and the Python peer.
    await page.waitForFunction(() => /^[2-9] connections/.test(document.getElementById("presence").textContent), null, { timeout: 20_000 });
  } finally {
    await page.close();
  }
});

test("Chromium negotiates permessage-deflate and a 4 kB push comes through compressed", async () => {
  const page = await context.newPage();
  try {
    await page.goto(`${server.url}/`);
    const got = await page.evaluate(async (url) => {
      const ws = new WebSocket(url, "herald.json");
      const big = "x".repeat(4000);
      const inbox = [];
      await new Promise((resolve, reject) => {
        ws.onopen = resolve;
        ws.onerror = () => reject(new Error("websocket failed"));
      });
      ws.onmessage = (e) => inbox.push(JSON.parse(e.data));
      const until = async (pred) => {
        for (let i = 0; i < 400 && !inbox.some(pred); i++) await new Promise((r) => setTimeout(r, 25));
        return inbox.find(pred);
      };
      ws.send(JSON.stringify({ id: 1, connect: {} }));
      await until((m) => m.id === 1);
      ws.send(JSON.stringify({ id: 2, subscribe: { channel: "deflate.check" } }));
      await until((m) => m.id === 2);
      ws.send(JSON.stringify({ id: 3, publish: { channel: "deflate.check", data: { big } } }));
      const push = await until((m) => m.pub?.channel === "deflate.check");
      ws.close();
      return { extensions: ws.extensions, intact: push?.pub?.data?.big === big };
    }, server.wsUrl);
    // Chromium offers the extension on its own; the server answers it
    // without context takeover (docs/protocol.md §1), and compresses every
    // message over 256 bytes (crates/server/tests/deflate.rs shows the bit).
    assert.match(got.extensions, /^permessage-deflate/);
    assert.match(got.extensions, /server_no_context_takeover/);
    assert.equal(got.intact, true);
  } finally {
    await page.close();
  }
});

test("WebSocket blocked: the page falls back to SSE by itself and still works", async () => {
  const page = await context.newPage();
  let blocked = 0;
  // The network refuses WebSocket: every attempt is closed before it opens.
  await page.routeWebSocket(/\/ws$/, (ws) => {
    blocked++;
    ws.close({ code: 1008, reason: "blocked" });
  });
  try {
    await exercise(page, "/", "sse", "demo-sse-fallback.png");
    assert.ok(blocked >= 1, "a WebSocket was attempted and blocked");
    assert.match(await page.textContent("#presence"), /not available over sse/);
  } finally {
    await page.close();
  }
});

test("long-polling forced: the demo still works", async () => {
  const page = await context.newPage();
  try {
    await exercise(page, "/?transport=longpoll", "longpoll", "demo-longpoll.png");
  } finally {
    await page.close();
  }
});

test("WebSocket with the binary encoding: the demo still works", async () => {
  const page = await context.newPage();
  try {
    await exercise(page, "/?transport=websocket&encoding=binary", "websocket", "demo-websocket-binary.png");
    assert.equal(await page.textContent("#encoding"), "binary");
  } finally {
    await page.close();
  }
});

test("a dropped network: the page reconnects by itself and recovers every row it missed", async () => {
  const proxy = new Proxy(server.port);
  await proxy.start();
  const page = await context.newPage();
  try {
    await page.goto(`http://127.0.0.1:${proxy.port}/`);
    await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 });
    const rows = () => page.evaluate(() => Number(document.getElementById("stream-status").dataset.rows ?? 0));
    await waitFor(async () => (await rows()) >= 5, "rows before the drop");
    proxy.pause(); // every connection reset, new ones refused
    await page.waitForFunction(() => document.getElementById("reconnects").textContent === "1", null, { timeout: 20_000 });
    const before = await rows();
    await new Promise((r) => setTimeout(r, 1000)); // ~20 rows published meanwhile
    proxy.resume();
    await page.waitForFunction(() => document.getElementById("state").textContent === "connected", null, { timeout: 30_000 });
    await waitFor(async () => (await rows()) >= before + 30, "the missed rows and new ones", 30_000);
    const status = await page.evaluate(() => ({ ...document.getElementById("stream-status").dataset }));
    assert.equal(status.gaps, "0", `rows lost across the reconnect: ${JSON.stringify(status)}`);
    assert.match(await page.textContent("#stream-status"), /0 resyncs/);
    await page.screenshot({ path: join(ARTIFACTS, "demo-after-reconnect.png"), fullPage: true });
  } finally {
    await page.close();
    await proxy.stop();
  }
});
