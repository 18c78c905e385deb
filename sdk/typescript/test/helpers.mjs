// Test helpers: the real Herald server binary started on a free port, a TCP
// proxy that can drop every connection while the server keeps running,
// polling for a condition, and HS256 tokens.
import { execFileSync, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { createServer, connect as tcpConnect } from "node:net";
import { existsSync, openSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../../", import.meta.url));

/**
 * $HERALD_BIN, else debug/herald in the directory cargo builds the workspace
 * into (`cargo metadata` says which: $CARGO_TARGET_DIR, a .cargo/config.toml,
 * or target/ in the checkout). Build it with `cargo build -p herald`.
 */
export function heraldBin() {
  const bin = process.env.HERALD_BIN ?? join(cargoTargetDir(), "debug", "herald");
  if (!existsSync(bin)) throw new Error(`no Herald binary at ${bin}: run \`cargo build -p herald\` or set HERALD_BIN`);
  return bin;
}

/** Where cargo builds the workspace (scripts/target-dir does the same). */
export function cargoTargetDir() {
  const meta = execFileSync("cargo", ["metadata", "--format-version", "1", "--no-deps"], {
    cwd: REPO,
    encoding: "utf8",
  });
  return JSON.parse(meta).target_directory;
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

const b64 = (s) => Buffer.from(s).toString("base64url");

/** An HS256 JWT (RFC 7519) with `claims`, signed with `secret`. */
export function jwt(claims, secret) {
  const head = `${b64(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${b64(JSON.stringify(claims))}`;
  return `${head}.${createHmac("sha256", secret).update(head).digest("base64url")}`;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitUntil(cond, what = "condition", timeout = 10_000) {
  const deadline = Date.now() + timeout;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** One `herald serve` process; restartable on the same port. */
export class Server {
  constructor(extra = []) {
    this.extra = extra;
    this.port = 0;
    this.proc = null;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  get wsUrl() {
    return `ws://127.0.0.1:${this.port}/ws`;
  }

  async start() {
    if (!this.port) this.port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), "herald-ts-"));
    this.log = join(dir, "server.log");
    const out = openSync(this.log, "w");
    this.proc = spawn(heraldBin(), ["serve", "--listen", `127.0.0.1:${this.port}`, "--history-size", "100", ...this.extra], {
      stdio: ["ignore", out, out],
    });
    const proc = this.proc;
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`herald exited with ${proc.exitCode}; log: ${this.log}`);
      try {
        const res = await fetch(`${this.url}/healthz`);
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`herald did not start; log: ${this.log}`);
      await sleep(20);
    }
  }

  async stop() {
    const proc = this.proc;
    if (proc === null) return;
    this.proc = null;
    if (proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGKILL");
    await exited;
  }
}

/** Forwards 127.0.0.1:port to a target port byte for byte; `drop()` resets
 * every forwarded connection, as a network failure would, and keeps listening. */
export class Proxy {
  constructor(targetPort) {
    this.targetPort = targetPort;
    this.sockets = new Set();
    this.pairs = [];
    this.port = 0;
  }

  start() {
    this.server = createServer((down) => {
      if (this.paused) {
        down.resetAndDestroy ? down.resetAndDestroy() : down.destroy();
        return;
      }
      const up = tcpConnect(this.targetPort, "127.0.0.1");
      this.sockets.add(down);
      this.sockets.add(up);
      const forget = (s) => () => this.sockets.delete(s);
      down.on("close", forget(down));
      up.on("close", forget(up));
      down.on("error", () => up.destroy());
      up.on("error", () => down.destroy());
      down.pipe(up);
      up.pipe(down);
      this.pairs.push([down, up]);
    });
    return new Promise((resolve) => this.server.listen(this.port, "127.0.0.1", () => {
      this.port = this.server.address().port;
      resolve();
    }));
  }

  drop() {
    for (const s of this.sockets) s.resetAndDestroy ? s.resetAndDestroy() : s.destroy();
    this.sockets.clear();
    this.pairs = [];
  }

  /** Stops forwarding on the open connections but keeps them open — a
   * silent network path. New connections are forwarded as usual. */
  freeze() {
    for (const [down, up] of this.pairs) {
      down.unpipe(up);
      up.unpipe(down);
      down.pause();
      up.pause();
    }
    this.pairs = [];
  }

  /** Drops every connection and refuses new ones until `resume()`. */
  pause() {
    this.paused = true;
    this.drop();
  }

  resume() {
    this.paused = false;
  }

  stop() {
    this.drop();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
