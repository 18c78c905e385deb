// Authentication against the real server (docs/protocol.md §5d): a server
// with an HS256 key that refuses anonymous clients, and a private namespace
// (`private:*` needs a grant to subscribe). Connection tokens on every
// transport (in `connect` on WebSocket and long-polling, as `?token=` on SSE),
// subscribe tokens (fixed, and a function asked before every (re)subscribe),
// and each refusal's code. Tokens are minted here with node:crypto.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { Client, ReplyError, ErrorCode, parseInfo } from "../dist/index.js";
import { Proxy, Server, jwt as signed, waitUntil } from "./helpers.mjs";

const SECRET = "typescript-sdk-test-secret-typescript-sdk-test";
const config = join(mkdtempSync(join(tmpdir(), "herald-ts-auth-")), "herald.toml");
writeFileSync(config, `token_hmac_secret = "${SECRET}"\n\n[[namespaces]]\nname = "private"\nsubscribe = "grant"\n`);
const server = new Server(["--config", config]);
before(() => server.start());
after(() => server.stop());

const FAST = { initialDelay: 50, maxDelay: 200 };
/** An HS256 JWT (RFC 7519) with `claims`, signed with the server's secret by default. */
const jwt = (claims, secret = SECRET) => signed(claims, secret);
const now = () => Math.floor(Date.now() / 1000);
const userToken = (sub, channels) => jwt({ sub, exp: now() + 3600, ...(channels ? { channels } : {}) });
const subToken = (sub, channel, ttl = 3600) => jwt({ sub, channel, exp: now() + ttl });
const isCode = (code) => (e) => e instanceof ReplyError && e.code === code;

const TWO_WAY = [
  { name: "websocket json", transports: ["websocket"], encoding: "json" },
  { name: "websocket binary", transports: ["websocket"], encoding: "binary" },
  { name: "long-polling", transports: ["longpoll"], encoding: "json" },
];

for (const c of TWO_WAY) {
  test(`${c.name}: the token's info claim shows in presence and join pushes`, async () => {
    const channel = `info.${c.name.replace(/\W/g, "")}`;
    const info = { name: "Carol \u00e9", seat: 3 };
    const watcher = new Client(server.wsUrl, { WebSocket, transports: c.transports, encoding: c.encoding, token: userToken("watcher") });
    const carol = new Client(server.wsUrl, { WebSocket, token: jwt({ sub: "carol", exp: now() + 3600, info }) });
    try {
      await watcher.connect();
      const joins = [];
      await watcher.subscribe(channel, { joinLeave: true, onJoin: (j) => joins.push(j) });
      await carol.connect();
      await carol.subscribe(channel);
      await waitUntil(() => joins.length === 1, "carol's join");
      assert.equal(joins[0].user, "carol");
      assert.deepEqual(parseInfo(joins[0].info), info);
      const members = await watcher.presence(channel);
      const byUser = Object.fromEntries(members.map((m) => [m.user, parseInfo(m.info)]));
      assert.deepEqual(byUser, { carol: info, watcher: undefined });
    } finally {
      watcher.close();
      carol.close();
    }
  });

  const slug = c.name.replace(/\W/g, "");
  const client = (opts) => new Client(server.wsUrl, { WebSocket, reconnect: FAST, transports: c.transports, encoding: c.encoding, ...opts });

  test(`${c.name}: connect without a token is refused with 101, for good`, async () => {
    const a = client({});
    await assert.rejects(a.connect(), isCode(ErrorCode.Unauthorized));
    assert.equal(a.state, "closed");
    const forged = client({ token: jwt({ sub: "eve" }, "x".repeat(40)) });
    await assert.rejects(forged.connect(), isCode(ErrorCode.Unauthorized));
  });

  test(`${c.name}: a private channel needs its subscribe token`, async () => {
    const channel = `private:${slug}`;
    const alice = client({ token: userToken("alice") });
    const pub = new Client(server.wsUrl, { WebSocket, token: userToken("bob") });
    try {
      await alice.connect();
      await pub.connect();
      // Connected with a token: the server knows the user.
      await alice.subscribe(`public.${slug}`);
      assert.deepEqual((await alice.presence(`public.${slug}`)).map((m) => m.user), ["alice"]);
      assert.deepEqual((await alice.presenceStats(`public.${slug}`)), { clients: 1, users: 1 });

      await assert.rejects(alice.subscribe(channel), isCode(ErrorCode.PermissionDenied));
      assert.ok(!alice.subscriptions.has(channel));
      await assert.rejects(alice.subscribe(channel, { token: subToken("alice", "private:other") }), isCode(ErrorCode.PermissionDenied));
      await assert.rejects(alice.subscribe(channel, { token: subToken("bob", channel) }), isCode(ErrorCode.PermissionDenied));
      await assert.rejects(alice.subscribe(channel, { token: subToken("alice", channel, -60) }), isCode(ErrorCode.TokenExpired));
      assert.equal(alice.state, "connected");

      const got = [];
      await alice.subscribe(channel, { token: subToken("alice", channel), onPublication: (p) => got.push(p.json()) });
      await pub.publish(channel, { n: 1 });
      await waitUntil(() => got.length === 1, "the publication");
      assert.deepEqual(got, [{ n: 1 }]);
    } finally {
      alice.close();
      pub.close();
    }
  });
}

test("a subscribe token function is asked before every (re)subscribe, and recovery works", async () => {
  const proxy = new Proxy(server.port);
  await proxy.start();
  const channel = "private:fresh";
  const asked = [];
  const c = new Client(`ws://127.0.0.1:${proxy.port}/ws`, {
    WebSocket, reconnect: FAST, transports: ["websocket"], encoding: "binary", token: () => userToken("dave"),
  });
  const pub = new Client(server.wsUrl, { WebSocket, token: userToken("pub") });
  const got = [];
  const subscribed = [];
  try {
    await c.connect();
    await pub.connect();
    await c.subscribe(channel, {
      token: async (ch) => {
        asked.push(ch);
        return subToken("dave", ch);
      },
      onPublication: (p) => got.push(p.json().n),
      onSubscribed: (s) => subscribed.push(s),
    });
    assert.deepEqual(asked, [channel]);
    await pub.publish(channel, { n: 1 });
    await waitUntil(() => got.length === 1, "the first publication");
    proxy.pause();
    await waitUntil(() => c.state !== "connected", "the drop");
    await pub.publish(channel, { n: 2 }); // missed while away: recovered
    proxy.resume();
    await waitUntil(() => subscribed.length === 2, "the re-subscription");
    await pub.publish(channel, { n: 3 });
    await waitUntil(() => got.length === 3, "every publication");
    assert.deepEqual(asked, [channel, channel]);
    assert.deepEqual(got, [1, 2, 3]);
    assert.equal(subscribed[1].recovered, true);
  } finally {
    proxy.resume();
    c.close();
    pub.close();
    await proxy.stop();
  }
});

test("a failing subscribe token function fails that subscribe only", async () => {
  const c = new Client(server.wsUrl, { WebSocket, transports: ["websocket"], token: userToken("erin") });
  try {
    await c.connect();
    await assert.rejects(c.subscribe("private:x", { token: () => { throw new Error("no token for you"); } }), /no token for you/);
    await assert.rejects(c.subscribe("private:y", { token: async () => 42 }), /must give a string/);
    await assert.rejects(c.subscribe("private:z", { token: 42 }), TypeError);
    assert.equal(c.subscriptions.size, 0);
    assert.ok((await c.ping()) >= 0);
  } finally {
    c.close();
  }
});

test("sse: the connection token travels as ?token=; grants open private channels", async () => {
  const pub = new Client(server.wsUrl, { WebSocket, token: userToken("pub") });
  const sse = (token) => new Client(server.url, { transports: ["sse"], reconnect: FAST, ...(token ? { token } : {}) });
  const granted = sse(userToken("frank", ["private:sse"]));
  const plain = sse(userToken("gina"));
  const anonymous = sse(null);
  const expired = sse(jwt({ sub: "hal", exp: now() - 60 }));
  try {
    await pub.connect();
    for (const c of [granted, plain, anonymous, expired]) await c.connect(); // emulated locally on SSE
    // The server checks the token when a stream opens.
    await assert.rejects(anonymous.subscribe("public.sse"), isCode(ErrorCode.Unauthorized));
    await assert.rejects(expired.subscribe("public.sse"), isCode(ErrorCode.TokenExpired));
    await plain.subscribe("public.sse");
    // No place for a subscribe token on /sse: a grant in the connection token is needed.
    await assert.rejects(plain.subscribe("private:sse", { token: subToken("gina", "private:sse") }), isCode(ErrorCode.PermissionDenied));
    const got = [];
    await granted.subscribe("private:sse", { onPublication: (p) => got.push(p.json()) });
    await pub.publish("private:sse", "secret");
    await waitUntil(() => got.length === 1, "the publication over SSE");
    assert.deepEqual(got, ["secret"]);
  } finally {
    for (const c of [pub, granted, plain, anonymous, expired]) c.close();
  }
});

test("a subscribe token function failing after a reconnect ends that subscription with code 101", async () => {
  const proxy = new Proxy(server.port);
  await proxy.start();
  let calls = 0;
  const ended = [];
  const c = new Client(`ws://127.0.0.1:${proxy.port}/ws`, { WebSocket, reconnect: FAST, transports: ["websocket"], token: userToken("fay") });
  try {
    await c.connect();
    const sub = await c.subscribe("private:once", {
      token: (ch) => {
        if (++calls > 1) throw new Error("token service down");
        return subToken("fay", ch);
      },
      onUnsubscribed: (u) => ended.push(u),
    });
    proxy.pause();
    await waitUntil(() => c.state !== "connected", "the drop");
    proxy.resume();
    await waitUntil(() => sub.ended, "the subscription to end");
    assert.equal(ended.length, 1);
    assert.equal(ended[0].code, ErrorCode.Unauthorized);
    assert.match(ended[0].reason, /token service down/);
    assert.ok(!c.subscriptions.has("private:once"));
    await waitUntil(() => c.state === "connected", "the reconnect");
    assert.ok((await c.ping()) >= 0);
  } finally {
    proxy.resume();
    c.close();
    await proxy.stop();
  }
});
