// Cluster fail-over with real processes: a redis-server and two Herald nodes
// sharing it (`--broker redis://…`). A client given [node A, node B] is
// subscribed on A while a publisher on B publishes continuously; A is killed
// (SIGKILL), the client moves to B and recovers there what it missed (channel
// positions live in Redis, so the epoch is the same on both nodes): every
// publication arrives exactly once, in order, offsets 1..N.
//
// To make the missed stretch certain rather than a matter of timing, the
// client reaches B through a proxy that refuses connections until the
// publisher has published a few more on B; the publisher keeps going while
// the client recovers, so recovery also races live publications.
//
// Needs `redis-server` on PATH: skipped without it, failed without it when the
// CI environment variable is set.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { connect as tcpConnect } from "node:net";
import { readFileSync } from "node:fs";
import WebSocket from "ws";
import { Client } from "../dist/index.js";
import { Proxy, Server, freePort, sleep, waitUntil } from "./helpers.mjs";

const FAST = { initialDelay: 50, maxDelay: 200 };

const HAVE_REDIS = !spawnSync("redis-server", ["--version"], { stdio: "ignore" }).error;
const NO_REDIS = "redis-server is not installed (Debian: apt-get install redis-server)";

/** A throw-away redis-server (no persistence) on a free port. */
class Redis {
  async start() {
    this.port = await freePort();
    this.output = "";
    this.proc = spawn("redis-server", ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    for (const s of [this.proc.stdout, this.proc.stderr]) s.on("data", (d) => (this.output += d));
    const deadline = Date.now() + 15_000;
    while (!(await this.ping())) {
      if (this.proc.exitCode !== null) throw new Error(`redis-server exited with ${this.proc.exitCode}: ${this.output}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not accept connections in 15 s: ${this.output}`);
      await sleep(50);
    }
  }

  ping() {
    return new Promise((resolve) => {
      const s = tcpConnect(this.port, "127.0.0.1");
      let reply = "";
      const done = (ok) => {
        s.destroy();
        resolve(ok);
      };
      s.setTimeout(1000, () => done(false));
      s.on("error", () => done(false));
      s.on("connect", () => s.write("PING\r\n"));
      s.on("data", (d) => {
        reply += d;
        if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
      });
    });
  }

  async stop() {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGKILL");
    await exited;
  }
}

test(
  "cluster: node A is killed, the client recovers on node B every publication exactly once, in order",
  { skip: HAVE_REDIS || process.env.CI ? false : NO_REDIS },
  async (t) => {
    if (!HAVE_REDIS) assert.fail(`${NO_REDIS}; it is required when CI is set`);
    const redis = new Redis();
    let a = null;
    let b = null;
    let proxyB = null;
    const clients = [];
    let stop = false;
    let pump = null;
    let ok = false;
    try {
      await redis.start();
      const broker = ["--broker", `redis://127.0.0.1:${redis.port}`];
      [a, b] = [new Server(broker), new Server(broker)];
      await Promise.all([a.start(), b.start()]);
      proxyB = new Proxy(b.port);
      await proxyB.start();
      const [urlA, urlB] = [a.wsUrl, `ws://127.0.0.1:${proxyB.port}/ws`];

      const channel = "cluster.failover";
      const got = [];
      const subscribed = [];
      const resyncs = [];
      const disconnects = [];
      const urls = [];
      const published = [];
      const client = new Client([urlA, urlB], { WebSocket, reconnect: FAST, transports: ["websocket"] });
      const publisher = new Client(b.wsUrl, { WebSocket });
      clients.push(client, publisher);
      client.on("connected", (info) => urls.push(info.url));
      client.on("disconnected", (d) => disconnects.push(d));

      await client.connect();
      assert.equal(client.url, urlA, "the first URL first");
      await client.subscribe(channel, {
        onPublication: (p) => got.push(p),
        onSubscribed: (s) => subscribed.push(s),
        onResync: (s) => resyncs.push(s),
      });
      await publisher.connect();

      // Published on B, delivered to the client on A: the nodes share the channel.
      pump = (async () => {
        while (!stop) {
          published.push(await publisher.publish(channel, { n: published.length + 1 }));
          await sleep(5);
        }
      })();
      await waitUntil(() => got.length >= 10, "publications from B through A");

      await a.stop(); // SIGKILL: no close frame, no disconnect push
      proxyB.pause(); // B refuses the client for a while
      await waitUntil(() => client.state !== "connected", "the loss of A");
      const killedAt = published.length;
      await waitUntil(() => published.length >= killedAt + 10, "publications while away");
      const missedUpTo = published.length;
      proxyB.resume(); // the client reaches B

      await waitUntil(() => subscribed.length === 2, "re-subscription on B", 15_000);
      const after = published.length;
      await waitUntil(() => published.length >= after + 10, "publications after the fail-over");
      stop = true;
      await pump;
      pump = null;
      await waitUntil(() => got.length >= published.length, "every publication");
      await client.ping(); // anything duplicated would have arrived by now

      const n = published.length;
      const oneToN = Array.from({ length: n }, (_, i) => i + 1);
      t.diagnostic(`published ${n}; A killed after ${killedAt}; ${missedUpTo - killedAt}+ published while away`);
      assert.deepEqual(published.map((p) => p.offset), oneToN);
      assert.equal(new Set(published.map((p) => p.epoch)).size, 1);
      assert.deepEqual(got.map((p) => p.offset), oneToN, "offsets 1..N, no gap, no duplicate");
      assert.deepEqual(got.map((p) => p.json().n), oneToN);
      assert.ok(got.every((p) => p.channel === channel));
      assert.ok(killedAt < missedUpTo, "some publications were made while the client was away");

      assert.deepEqual(urls, [urlA, urlB]);
      assert.equal(client.url, urlB);
      assert.equal(disconnects.length, 1);
      assert.equal(disconnects[0].code, null);
      assert.equal(disconnects[0].reconnect, true);
      const [first, again] = subscribed;
      assert.equal(first.resubscribed, false);
      assert.equal(first.offset, 0);
      assert.equal(again.resubscribed, true);
      assert.equal(again.recoveryRequested, true);
      assert.equal(again.recovered, true, "the SDK reports the recovery as successful");
      assert.equal(again.needsResync, false);
      assert.deepEqual(resyncs, []);
      assert.equal(again.epoch, first.epoch, "the same epoch on both nodes");
      assert.equal(again.epoch, published[0].epoch);
      assert.equal(client.state, "connected");
      ok = true;
    } finally {
      stop = true;
      await pump?.catch(() => {});
      for (const c of clients) c.close();
      await proxyB?.stop();
      await Promise.all([a?.stop(), b?.stop()]);
      await redis.stop();
      if (!ok) {
        for (const [name, s] of [["A", a], ["B", b]]) {
          if (s?.log) t.diagnostic(`node ${name} log:\n${readFileSync(s.log, "utf8")}`);
        }
      }
    }
  },
);
