// What the outside tests need around the client under test (eventsource's
// whole harness; free ports and `redis-server` for the Bayeux and Pusher
// ones), written here rather than borrowed from sdk/typescript so that these
// packages stay a stranger's view of Herald: real `herald serve` and `redis-server`
// processes on free ports (killable and restartable on the same port), a TCP
// proxy that records each request's Last-Event-ID and can cut or redirect
// connections, a publisher that numbers its publications, and a collector
// that checks a client saw each number once, in order.
import { spawn } from "node:child_process";
import { createServer, connect as tcpConnect } from "node:net";
import { openSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` every 10 ms; throws after `timeout` ms. */
export async function waitUntil(cond, what, timeout = 10_000) {
  const deadline = Date.now() + timeout;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await sleep(10);
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const LOGS = mkdtempSync(join(tmpdir(), "herald-eventsource-"));
/** Every child process, killed when the test process exits whatever happens
 * (a signal, such as the runner's `timeout`, included). */
const children = new Set();
const killChildren = () => {
  for (const p of children) p.kill("SIGKILL");
};
process.on("exit", killChildren);
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.on(signal, () => {
    killChildren();
    process.exit(1);
  });
}

/** A child process that can be SIGKILLed and started again with the same
 * arguments (so on the same port). */
class Child {
  constructor(name, cmd, args) {
    this.name = name;
    this.cmd = cmd;
    this.args = args;
    this.proc = null;
    this.starts = 0;
  }

  spawn() {
    this.starts += 1;
    this.log = join(LOGS, `${this.name}.${this.starts}.log`);
    const out = openSync(this.log, "w");
    const proc = spawn(this.cmd, this.args, { stdio: ["ignore", out, out] });
    children.add(proc);
    proc.once("exit", () => children.delete(proc));
    this.proc = proc;
    return proc;
  }

  /** SIGKILL, as a crash; resolves once the process is gone. */
  async kill() {
    const proc = this.proc;
    this.proc = null;
    if (proc === null || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGKILL");
    await exited;
  }
}

/** Whether a Redis on `port` answers PING (false on any failure, within 1 s). */
function pong(port) {
  return new Promise((resolve) => {
    const s = tcpConnect(port, "127.0.0.1", () => s.write("PING\r\n"));
    const done = (ok) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1_000, () => done(false));
    s.on("data", (d) => done(d.toString().startsWith("+PONG")));
    s.on("error", () => done(false));
  });
}

/** `redis-server` with no persistence on a free port. */
export class Redis extends Child {
  static async start() {
    const port = await freePort();
    const r = new Redis("redis", "redis-server", [
      "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
    ]);
    r.port = port;
    r.spawn();
    // PING until +PONG, bounded.
    const deadline = Date.now() + 10_000;
    while (!(await pong(port))) {
      if (r.proc.exitCode !== null || Date.now() > deadline) {
        throw new Error(`redis-server did not answer PING; log: ${r.log}`);
      }
      await sleep(50);
    }
    return r;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }
}

/** One `herald serve`; `restart()` brings it back on the same port. */
export class Herald extends Child {
  static async start(name, extra = []) {
    const port = await freePort();
    const bin = process.env.HERALD_BIN;
    if (!bin) throw new Error("HERALD_BIN is not set (tests/outside/eventsource.test.sh sets it)");
    // History larger than the default 100: a reconnect waits for the
    // server's `retry: 2000`, and publications go on meanwhile.
    const h = new Herald(name, bin, [
      "serve", "--listen", `127.0.0.1:${port}`, "--history-size", "1000", ...extra,
    ]);
    h.port = port;
    await h.restart();
    return h;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the process and waits for `/readyz` (broker reachable, too),
   * or with `ready: false` only for `/healthz` (listening). */
  async restart({ ready = true } = {}) {
    const proc = this.spawn();
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`${this.name} exited with ${proc.exitCode}; log: ${this.log}`);
      try {
        const res = await fetch(`${this.url}/${ready ? "readyz" : "healthz"}`);
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${this.name} not ready after 15 s; log: ${this.log}`);
      await sleep(20);
    }
  }
}

/** Forwards 127.0.0.1:port to `target` (a port, changeable at any time),
 * recording each request's `Last-Event-ID` header (null when absent) in
 * `requests`. `cut()` destroys the client side of every forwarded connection,
 * as a network failure would; the proxy keeps listening. `refuse()` stops
 * listening and cuts, `accept()` listens again: the host is down, then up. */
export class Proxy {
  constructor(target) {
    this.target = target;
    this.requests = [];
    this.pairs = new Set();
  }

  async start() {
    this.server = createServer((down) => {
      const up = tcpConnect(this.target, "127.0.0.1");
      const pair = { down, up };
      this.pairs.add(pair);
      const end = () => {
        this.pairs.delete(pair);
        down.destroy();
        up.destroy();
      };
      down.on("error", end).on("close", end);
      up.on("error", end).on("close", end);
      // Read the request head as it passes (it comes in one segment on
      // loopback, but do not rely on it).
      let head = "";
      const sniff = (chunk) => {
        head += chunk.toString("latin1");
        const endOfHead = head.indexOf("\r\n\r\n");
        if (endOfHead < 0 && head.length < 16_384) return;
        down.off("data", sniff);
        const m = /^last-event-id:[ \t]*(.*)$/im.exec(head.slice(0, Math.max(endOfHead, 0)));
        this.requests.push(m ? m[1].trim() : null);
      };
      down.on("data", sniff);
      down.pipe(up);
      up.pipe(down);
    });
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = this.server.address().port;
    return this;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  cut() {
    const n = this.pairs.size;
    for (const { down } of this.pairs) down.resetAndDestroy();
    return n;
  }

  /** Stops listening (connections are refused, as by a host that is down)
   * and cuts every connection. */
  async refuse() {
    await new Promise((resolve) => {
      this.server.close(() => resolve());
      this.cut();
    });
  }

  /** Listens again, on the same port. */
  accept() {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.port, "127.0.0.1", () => {
        this.server.off("error", reject);
        resolve();
      });
    });
  }

  stop() {
    for (const { down, up } of this.pairs) {
      down.destroy();
      up.destroy();
    }
    if (!this.server.listening) return Promise.resolve();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Publishes `{"seq":n}` for n = 1, 2, … to `channel` through `POST
 * /api/publish` of `url()` (read before each publication), one after the
 * other, `gapMs` apart. `onPublished(n)` runs after each one is answered,
 * and may await (the test cuts connections there). Every publication must be
 * answered 200: they go to a node that stays up. */
export async function publishAll({ url, channel, count, gapMs, onPublished = () => {} }) {
  for (let seq = 1; seq <= count; seq++) {
    const res = await fetch(`${url()}/api/publish`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ channel, data: { seq } }),
      signal: AbortSignal.timeout(5_000),
    });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`publication ${seq} answered ${res.status}: ${body}`);
    await onPublished(seq);
    if (gapMs > 0) await sleep(gapMs);
  }
}

/** One EventSource of one library on one stream, and what it saw. */
export class Collector {
  /** `make(url)` constructs the library's EventSource. */
  constructor(label, make, url) {
    this.label = label;
    this.seqs = [];
    this.ids = [];
    this.opens = 0;
    this.errors = 0;
    this.others = [];
    this.es = make(url);
    this.es.onopen = () => {
      this.opens += 1;
    };
    this.es.onerror = () => {
      this.errors += 1;
    };
    this.es.onmessage = (ev) => {
      let seq;
      try {
        seq = JSON.parse(ev.data).seq;
      } catch {
        seq = undefined;
      }
      if (!Number.isInteger(seq)) {
        this.others.push(ev.data);
        return;
      }
      this.seqs.push(seq);
      this.ids.push(ev.lastEventId);
    };
    // Herald's own notices (`unrecovered`, errors, disconnect) would come as
    // `event: herald`: none is expected here, so each one is a failure.
    this.es.addEventListener("herald", (ev) => this.others.push(`herald: ${ev.data}`));
  }

  /** Reconnects so far: every open after the first. */
  get reconnects() {
    return Math.max(0, this.opens - 1);
  }

  /** Waits until `count` publications arrived, or `timeout` ms passed. */
  async waitFor(count, timeout) {
    await waitUntil(() => this.seqs.length >= count, `${this.label}: ${count} publications (has ${this.seqs.length})`, timeout);
  }

  /** Duplicates, missing and out-of-order publications against 1..count. */
  tally(count) {
    const seen = new Set();
    let duplicates = 0;
    let outOfOrder = 0;
    let last = 0;
    for (const s of this.seqs) {
      if (seen.has(s)) duplicates += 1;
      else if (s < last) outOfOrder += 1;
      seen.add(s);
      last = Math.max(last, s);
    }
    let missing = 0;
    for (let s = 1; s <= count; s++) if (!seen.has(s)) missing += 1;
    const unexpected = [...seen].filter((s) => s < 1 || s > count).length;
    return { received: this.seqs.length, duplicates, missing, outOfOrder, unexpected };
  }

  close() {
    this.es.close();
  }
}
