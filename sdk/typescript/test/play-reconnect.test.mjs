// A seat had with `play` is kept across a dropped connection and taken back
// with `sit`, as after `sit` (docs/protocol.md §5e "Reconnecting", §5f):
// against a real server with HS256 tokens (seats belong to the token's
// user), through a proxy that drops every connection while the server keeps
// running. The other player sees the seat `away`, then `back`; someone
// else's `sit` at a table made by `play` is refused (116).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { Client, ErrorCode, ReplyError } from "../dist/index.js";
import { Proxy, Server, jwt, waitUntil } from "./helpers.mjs";

const SECRET = "typescript-sdk-play-reconnect-secret-0123456789";
const config = join(mkdtempSync(join(tmpdir(), "herald-ts-play-")), "herald.toml");
writeFileSync(config, `token_hmac_secret = "${SECRET}"\n`);
const server = new Server(["--config", config]);
let proxy;
before(async () => {
  await server.start();
  proxy = new Proxy(server.port);
  await proxy.start();
});
after(async () => {
  await proxy.stop();
  await server.stop();
});

/** A connection token for user `sub`, valid for an hour. */
const token = (sub) => jwt({ sub, exp: Math.floor(Date.now() / 1000) + 3600 }, SECRET);

const FAST = { initialDelay: 50, maxDelay: 200 };

for (const encoding of ["json", "binary"]) {
  test(`${encoding}: a played seat survives a dropped connection and is taken back with sit`, async () => {
    const alice = new Client(`ws://127.0.0.1:${proxy.port}/ws`, { WebSocket, encoding, token: token(`alice-${encoding}`), reconnect: FAST });
    const bob = new Client(server.wsUrl, { WebSocket, encoding, token: token(`bob-${encoding}`) });
    const carol = new Client(server.wsUrl, { WebSocket, encoding, token: token(`carol-${encoding}`) });
    try {
      await Promise.all([alice.connect(), bob.connect(), carol.connect()]);
      const mine = await alice.play({ game: "holdem", seats: 3, private: true });
      const theirs = await bob.play({ code: mine.code });
      assert.equal(theirs.table, mine.table);
      const seen = [];
      bob.on("seat", (s) => {
        if (s.table === mine.table && s.seat === mine.seat) seen.push(s.status);
      });
      // The connection drops; the client reconnects by itself; the seat waits.
      let reconnected = false;
      alice.on("connected", () => (reconnected = true));
      proxy.drop();
      await waitUntil(() => seen.includes("away"), "bob seeing alice away");
      await waitUntil(() => reconnected && alice.state === "connected", "alice reconnected");
      const back = await alice.sit(mine.table);
      assert.equal(back.seat, mine.seat, "the same seat");
      assert.equal(JSON.parse(new TextDecoder().decode(back.data)).t, "state", "a fresh private snapshot");
      await waitUntil(() => seen.includes("back"), "bob seeing alice back");
      // Seats at a table made by play are had through play only.
      await assert.rejects(carol.sit(mine.table), (e) => e instanceof ReplyError && e.code === ErrorCode.SeatUnavailable);
      await alice.stand(mine.table);
      await waitUntil(() => seen.includes("left"), "bob seeing alice leave");
    } finally {
      for (const c of [alice, bob, carol]) c.close();
    }
  });
}
