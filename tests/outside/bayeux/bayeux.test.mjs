// Herald's Bayeux endpoint (issue 27) checked with CometD's own JavaScript
// client: the `cometd` package running in Node through `cometd-nodejs-client`
// (its XMLHttpRequest and WebSocket adapters), and the same package in
// headless Chromium (playwright-core, Debian's chromium: a page of another
// origin, so long-polling is cross-origin XHR with CORS), at the versions
// pinned by package-lock.json. The clients connect to real herald processes
// (HERALD_BIN) on free 127.0.0.1 ports: handshake with Herald's JWT in
// `ext`, wildcard subscriptions, publications from CometD clients, from
// Herald's HTTP API and from a Herald WebSocket client, both transports
// (long-polling and websocket), namespace permissions, /service channels,
// CometD's ack and timestamp extensions, 402 recovery across a server
// restart, and disconnect.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep, Redis } from '../harness.mjs';
import { adapt } from 'cometd-nodejs-client';
import { CometD, AckExtension, TimeStampExtension } from 'cometd';
import WebSocket from 'ws';
import { chromium } from 'playwright-core';

adapt();

const WAIT_MS = 5000;
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const MODULES = new URL('./node_modules/', import.meta.url);
// The page CometD runs in, in Chromium: served by this test on its own port
// (another origin than Herald's), with cometd's ES modules from node_modules.
const PAGE = `<!doctype html><meta charset="utf-8"><title>cometd</title>
<script type="module">import { CometD } from "/cometd/cometd.js"; window.CometD = CometD; window.ready = true;</script>`;
const SECRET = 'bayeux-outside-secret-' + 'x'.repeat(32);
const BIN = process.env.HERALD_BIN;
let dir;
let main; // {proc, port}: token auth, a locked namespace
const clients = [];

/** Resolves with the first call of `register(cb)`, rejects after WAIT_MS. */
function once(what, register, ms = WAIT_MS) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    register((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}


async function startHerald(name, port, toml) {
  const config = join(dir, `${name}.toml`);
  writeFileSync(config, `listen = "127.0.0.1:${port}"\n${toml}`);
  const proc = spawn(BIN, ['serve', '--config', config], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, RUST_LOG: 'warn' },
  });
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.ok) return { proc, port };
    } catch {
      // not listening yet
    }
    await sleep(25);
  }
  proc.kill();
  throw new Error(`herald ${name} did not start`);
}

function stopHerald(h) {
  return new Promise((resolve) => {
    if (h.proc.exitCode !== null) return resolve();
    h.proc.once('exit', () => resolve());
    h.proc.kill('SIGKILL');
  });
}

function token(user) {
  return execFileSync(BIN, ['token', '--user', user, '--secret', SECRET, '--ttl', '1h'], {
    encoding: 'utf8',
  }).trim();
}

/** A CometD client of `port` on `transport` ('websocket' or 'long-polling'). */
function cometd(port, transport) {
  const c = new CometD();
  if (transport === 'long-polling') c.unregisterTransport('websocket');
  c.unregisterTransport('callback-polling');
  c.configure({ url: `http://127.0.0.1:${port}/cometd`, logLevel: 'warn', maxNetworkDelay: 40000 });
  clients.push(c);
  return c;
}

function handshake(c, props = {}) {
  return once('handshake reply', (done) => c.handshake(props, done));
}

async function connected(port, transport, user = 'ann') {
  const c = cometd(port, transport);
  const reply = await handshake(c, { ext: { herald: { token: token(user) } } });
  assert.equal(reply.successful, true, JSON.stringify(reply));
  assert.equal(c.getTransport().type, transport);
  return c;
}

/** Subscribes and resolves once the server acknowledged it; `inbox` gets every delivery. */
function subscribe(c, channel, inbox) {
  return once(`subscribe ${channel}`, (done) =>
    c.subscribe(channel, (m) => inbox.push(m), (reply) => done(reply)),
  );
}

function publish(c, channel, data) {
  return once(`publish ${channel}`, (done) => c.publish(channel, data, done));
}

/** Resolves once `pred()` holds (polled), rejects after WAIT_MS. */
function until(what, pred) {
  return once(what, (done) => {
    const poll = () => (pred() ? done() : setTimeout(poll, 10));
    poll();
  });
}

async function apiPublish(port, channel, data) {
  const r = await fetch(`http://127.0.0.1:${port}/api/publish`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ channel, data }),
  });
  assert.equal(r.status, 200, await r.text());
}

before(async () => {
  assert.ok(BIN, 'HERALD_BIN must name the herald binary');
  dir = mkdtempSync(join(tmpdir(), 'herald-bayeux-'));
  main = await startHerald(
    'main',
    await freePort(),
    `token_hmac_secret = "${SECRET}"\n[[namespaces]]\nname = "locked"\npublish = "none"\n`,
  );
});

after(async () => {
  for (const c of clients) {
    try {
      if (!c.isDisconnected()) c.disconnect();
    } catch {
      // already gone
    }
  }
  await sleep(100);
  if (main) await stopHerald(main);
  rmSync(dir, { recursive: true, force: true });
});

for (const transport of ['long-polling', 'websocket']) {
  test(`${transport}: wildcards, publications from CometD and from Herald's HTTP API`, async () => {
    const c = await connected(main.port, transport);
    const one = [];
    const all = [];
    const s1 = await subscribe(c, `/${transport}/*`, one);
    assert.equal(s1.successful, true, JSON.stringify(s1));
    const s2 = await subscribe(c, `/${transport}/**`, all);
    assert.equal(s2.successful, true, JSON.stringify(s2));

    await apiPublish(main.port, `${transport}.room1`, { text: 'from the API' });
    await apiPublish(main.port, `${transport}.room1.deep`, { text: 'deep' });
    await until('two deliveries through /**', () => all.length === 2);
    await until('one delivery through /*', () => one.length === 1);
    assert.equal(one[0].channel, `/${transport}/room1`);
    assert.deepEqual(one[0].data, { text: 'from the API' });
    assert.deepEqual(all.map((m) => m.channel).sort(), [`/${transport}/room1`, `/${transport}/room1/deep`]);

    // Another CometD client (the other transport) publishes.
    const other = await connected(main.port, transport === 'websocket' ? 'long-polling' : 'websocket', 'bob');
    const p = await publish(other, `/${transport}/room2`, { n: 42 });
    assert.equal(p.successful, true, JSON.stringify(p));
    await until('the CometD publication', () => one.some((m) => m.channel === `/${transport}/room2`));
    assert.deepEqual(one.find((m) => m.channel === `/${transport}/room2`).data, { n: 42 });

    const d = await once('disconnect reply', (done) => c.disconnect(done));
    assert.equal(d.successful, true);
    other.disconnect();
  });
}

test("a Herald WebSocket client and a CometD client share a namespaced channel", async () => {
  const c = await connected(main.port, 'websocket');
  const inbox = [];
  await subscribe(c, '/chat~eu/room1', inbox);
  const ws = new WebSocket(`ws://127.0.0.1:${main.port}/ws`);
  await once('herald ws open', (done) => ws.once('open', done));
  const replies = [];
  ws.on('message', (m) => replies.push(JSON.parse(m.toString())));
  ws.send(JSON.stringify({ id: 1, connect: { token: token('carol') } }));
  ws.send(JSON.stringify({ id: 2, subscribe: { channel: 'chat:eu.room1' } }));
  await until('herald connect and subscribe', () => replies.filter((r) => r.id).length >= 2);
  ws.send(JSON.stringify({ id: 3, publish: { channel: 'chat:eu.room1', data: { from: 'herald' } } }));
  await until('the Herald publication on CometD', () => inbox.length === 1);
  assert.equal(inbox[0].channel, '/chat~eu/room1');
  assert.deepEqual(inbox[0].data, { from: 'herald' });
  await publish(c, '/chat~eu/room1', { from: 'cometd' });
  await until('the CometD publication on Herald', () =>
    replies.some((r) => r.pub && r.pub.data && r.pub.data.from === 'cometd'),
  );
  ws.close();
  c.disconnect();
});

test('namespace rules, /service channels, and a handshake without a token', async () => {
  const c = await connected(main.port, 'long-polling');
  const denied = await publish(c, '/locked~x', { no: 1 });
  assert.equal(denied.successful, false);
  assert.match(denied.error, /^403:\/locked~x:/);
  const inbox = [];
  const s = await subscribe(c, '/service/echo', inbox);
  assert.equal(s.successful, true);
  const sv = await publish(c, '/service/echo', { hi: 1 });
  assert.equal(sv.successful, true);
  await sleep(200);
  assert.equal(inbox.length, 0, 'no service: nothing comes back');
  c.disconnect();

  const anon = cometd(main.port, 'long-polling');
  const failed = await handshake(anon);
  assert.equal(failed.successful, false);
  assert.match(failed.error, /^401::/);
  assert.equal(failed.advice.reconnect, 'none');
});

for (const transport of ['long-polling', 'websocket']) {
  test(`${transport}: CometD's ack and timestamp extensions`, async () => {
    const port = await freePort();
    const h = await startHerald(`ack-${transport}`, port, '[bayeux]\ntimeout_ms = 2000\ntimestamp = true\n');
    try {
      const c = cometd(port, transport);
      c.registerExtension('ack', new AckExtension());
      c.registerExtension('timestamp', new TimeStampExtension());
      const acks = [];
      c.addListener('/meta/connect', (m) => {
        if (m.successful && m.ext && typeof m.ext.ack === 'number') acks.push(m.ext.ack);
      });
      const hs = await handshake(c);
      assert.equal(hs.successful, true, JSON.stringify(hs));
      assert.deepEqual(hs.ext.ack, { enabled: true, batch: 0 });
      assert.match(hs.timestamp, / GMT$/);
      const inbox = [];
      await subscribe(c, '/acked/**', inbox);
      for (let i = 1; i <= 5; i++) await apiPublish(port, `acked.n${i % 2}`, { i });
      // At least once: a batch whose acknowledgement the server did not
      // get (a connect the client gave up on under load) comes again.
      await until('five acknowledged deliveries', () => new Set(inbox.map((m) => m.data.i)).size === 5);
      assert.deepEqual([...new Set(inbox.map((m) => m.data.i))], [1, 2, 3, 4, 5]);
      assert.ok(inbox.every((m) => / GMT$/.test(m.timestamp)), JSON.stringify(inbox[0]));
      await until('connect replies numbered as batches', () => acks.length >= 2);
      assert.ok(acks.every((n, i) => i === 0 || n > acks[i - 1]), JSON.stringify(acks));
      const d = await once('disconnect reply', (done) => c.disconnect(done));
      assert.equal(d.successful, true);
    } finally {
      await stopHerald(h);
    }
  });
}

// Long-polling resumes from the BAYEUX_ACKED cookie; websocket from the
// positions the dead node wrote to Redis, found through the old clientId
// the client's next connect brings on its new socket (decision 0016).
for (const transport of ['long-polling', 'websocket']) test(`${transport} with acks: the node dies mid-stream, the client handshakes on its replacement and loses nothing`, async (t) => {
  if (process.env.CI !== 'true' && !['/usr/bin/redis-server', '/usr/local/bin/redis-server'].some((p) => existsSync(p))) {
    return t.skip('no redis-server');
  }
  const redis = await Redis.start();
  const cluster = `broker = "${redis.url}"\n[bayeux]\ntimeout_ms = 500\n`;
  const port = await freePort();
  let a = await startHerald('resume-a', port, cluster);
  const b = await startHerald('resume-b', await freePort(), cluster);
  try {
    const c = cometd(port, transport);
    c.setBackoffIncrement(100);
    c.registerExtension('ack', new AckExtension());
    const inbox = [];
    const handshakes = [];
    const subscribed = [];
    c.addListener('/meta/handshake', (m) => {
      handshakes.push(m);
      if (m.successful) c.subscribe('/resume/feed', (d) => inbox.push(d.data.i));
    });
    c.addListener('/meta/subscribe', (m) => {
      if (m.successful) subscribed.push(m);
    });
    assert.equal((await handshake(c)).successful, true);
    // Publish only once node A confirmed the subscription (a fixed pause
    // was not always enough on a loaded machine: 1..3 went before it).
    await until('the subscription on node A', () => subscribed.length >= 1);
    // And a websocket session's positions are written at most once a
    // second: node A must have lived past its first write (decision 0016).
    await sleep(300);
    let next = 1;
    const publishOnB = async (n) => {
      for (let k = 0; k < n; k++) await apiPublish(b.port, 'resume.feed', { i: next++ });
    };
    await publishOnB(3);
    await until('1..3 on node A', () => inbox.length >= 3);
    // Acknowledged by the next connect; then more arrive and node A dies.
    await sleep(700);
    await publishOnB(2);
    await until('4 and 5 on node A', () => inbox.includes(5));
    await stopHerald(a);
    await publishOnB(3); // 6..8 while the client has no node
    a = await startHerald('resume-a', port, cluster); // a new node behind the same address
    await until('a handshake on the new node', () => handshakes.filter((m) => m.successful).length >= 2);
    // As above: publish once the new node confirmed the subscription (seen
    // once in a full run on a loaded machine: 9 went before it, 300 ms
    // after the handshake, and never came).
    await until('the subscription on the new node', () => subscribed.length >= 2);
    await sleep(300);
    await publishOnB(1); // 9
    await until('9 after the loss', () => inbox.includes(9));
    const missing = [];
    for (let i = 1; i <= 9; i++) if (!inbox.includes(i)) missing.push(i);
    assert.deepEqual(missing, [], `received ${JSON.stringify(inbox)}`);
    // In order, each at least once: duplicates only of what came before the loss.
    const firstSeen = inbox.filter((v, i) => inbox.indexOf(v) === i);
    assert.deepEqual(firstSeen, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const d = await once('disconnect reply', (done) => c.disconnect(done));
    assert.equal(d.successful, true);
  } finally {
    await stopHerald(a);
    await stopHerald(b);
    await redis.kill();
  }
});

test('CometD in Chromium, cross-origin: long-polling and websocket', async (t) => {
  if (!existsSync(CHROMIUM)) {
    if (process.env.CI === 'true') throw new Error(`no Chromium at ${CHROMIUM}`);
    t.skip(`no Chromium at ${CHROMIUM}`);
    return;
  }
  const pages = http.createServer((req, res) => {
    const path = req.url.split('?')[0];
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end(PAGE);
    }
    const m = /^\/cometd\/([A-Za-z0-9]+\.js)$/.exec(path);
    if (!m) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, { 'content-type': 'text/javascript' });
    res.end(readFileSync(new URL(`cometd/${m[1]}`, MODULES)));
  });
  await new Promise((r) => pages.listen(0, '127.0.0.1', r));
  const profile = mkdtempSync(join(tmpdir(), 'herald-bayeux-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  try {
    for (const transport of ['long-polling', 'websocket']) {
      const page = await context.newPage();
      await page.goto(`http://127.0.0.1:${pages.address().port}/`);
      await page.waitForFunction(() => window.ready, null, { timeout: WAIT_MS });
      await page.evaluate(
        ([port, transport, tok]) => {
          window.got = [];
          const c = new window.CometD();
          if (transport === 'long-polling') c.unregisterTransport('websocket');
          c.configure({ url: `http://127.0.0.1:${port}/cometd`, logLevel: 'warn' });
          window.c = c;
          c.handshake({ ext: { herald: { token: tok } } }, (h) => {
            window.handshake = h;
            if (h.successful) {
              c.subscribe('/browser/*', (m) => window.got.push(m), (s) => (window.subscribed = s));
            }
          });
        },
        [main.port, transport, token('dora')],
      );
      await page.waitForFunction(() => window.subscribed, null, { timeout: WAIT_MS }).catch(() => {
        throw new Error(`timed out in Chromium (${transport}) waiting for the subscription`);
      });
      const state = await page.evaluate(() => ({
        handshake: window.handshake.successful,
        subscribed: window.subscribed.successful,
        transport: window.c.getTransport().type,
      }));
      assert.deepEqual(state, { handshake: true, subscribed: true, transport });
      await apiPublish(main.port, `browser.${transport === 'websocket' ? 'ws' : 'lp'}`, { to: transport });
      await page.waitForFunction(() => window.got.length === 1, null, { timeout: WAIT_MS }).catch(() => {
        throw new Error(`timed out in Chromium (${transport}) waiting for the publication`);
      });
      assert.deepEqual(await page.evaluate(() => window.got[0].data), { to: transport });
      await page.evaluate(() => window.c.disconnect());
      await page.close();
    }
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
    pages.close();
  }
});

test('an unknown clientId gets 402 and reconnect: handshake; the client handshakes again after a restart', async () => {
  const port = await freePort();
  let h = await startHerald('restart', port, '[bayeux]\ntimeout_ms = 1000\n');
  try {
    const c = cometd(port, 'long-polling');
    c.setBackoffIncrement(100);
    const inbox = [];
    const handshakes = [];
    c.addListener('/meta/handshake', (m) => {
      handshakes.push(m);
      if (m.successful) c.subscribe('/restart/news', (d) => inbox.push(d));
    });
    const first = await handshake(c);
    assert.equal(first.successful, true);
    const firstId = c.getClientId();
    await until('first subscription', () => handshakes.length === 1);
    await sleep(200);

    // A raw connect with a clientId that never existed.
    const r = await fetch(`http://127.0.0.1:${port}/cometd`, {
      method: 'POST',
      body: JSON.stringify([{ channel: '/meta/connect', clientId: 'nope', connectionType: 'long-polling', id: '1' }]),
    });
    const [reply] = await r.json();
    assert.equal(reply.successful, false);
    assert.equal(reply.error, '402::Unknown client');
    assert.equal(reply.advice.reconnect, 'handshake');

    // The server restarts: the session is gone, the client's next connect
    // gets 402, it handshakes again and its listener subscribes again.
    await stopHerald(h);
    h = await startHerald('restart', port, '[bayeux]\ntimeout_ms = 1000\n');
    await until('a second successful handshake', () => handshakes.filter((m) => m.successful).length >= 2);
    assert.notEqual(c.getClientId(), firstId);
    await sleep(300);
    // The new subscription may still be on its way: publish until one lands.
    for (let i = 0; i < 20 && inbox.length === 0; i++) {
      await apiPublish(port, 'restart.news', { after: 'restart' });
      await sleep(250);
    }
    assert.ok(inbox.length > 0, 'a publication reached the re-handshaken client');
    assert.deepEqual(inbox[0].data, { after: 'restart' });
    const d = await once('disconnect reply', (done) => c.disconnect(done));
    assert.equal(d.successful, true);
    // After the disconnect its clientId is unknown.
    const again = await fetch(`http://127.0.0.1:${port}/cometd`, {
      method: 'POST',
      body: JSON.stringify([{ channel: '/meta/connect', clientId: c.getClientId() ?? 'x', connectionType: 'long-polling' }]),
    });
    assert.equal((await again.json())[0].successful, false);
  } finally {
    await stopHerald(h);
  }
});
