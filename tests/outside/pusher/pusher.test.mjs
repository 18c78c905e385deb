// Herald's Pusher endpoint checked with Pusher's own libraries (issue 16):
// pusher-js (the browser/Node client) and laravel-echo on top of it connect
// to Herald's /app/{key}, and
// the `pusher` server SDK publishes through Herald's /apps/{id}/ HTTP API and
// signs channel authorisations (authorizeChannel) in an auth endpoint served
// by this test. One herald (HERALD_BIN) serves every test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { freePort } from '../harness.mjs';
import { randomBytes } from 'node:crypto';
import Pusher from 'pusher-js';
import PusherServer from 'pusher';
import Echo from 'laravel-echo';
import { chromium } from 'playwright-core';

const KEY = 'outside-key';
const SECRET = 'outside-secret-' + Math.random().toString(36).slice(2);
const WAIT_MS = 5000;
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const MODULES = new URL('./node_modules/', import.meta.url);
// The page laravel-echo runs in, in Chromium: served by the test's app server
// (with the scripts from node_modules and the auth endpoint at Laravel's
// /broadcasting/auth), connecting to Herald on another port.
const PAGE = `<!doctype html><meta charset="utf-8"><title>echo</title>
<script src="/pusher.min.js"></script><script src="/echo.iife.js"></script>`;
const ASSETS = {
  '/pusher.min.js': 'pusher-js/dist/web/pusher.min.js',
  '/echo.iife.js': 'laravel-echo/dist/echo.iife.js',
};

let herald, port, authServer, authPort, sdk, hookServer;
// Webhook POSTs as received: {headers, rawBody}.
const hooks = [];
const clients = [];

/** Resolves with the first call of `register(cb)`, rejects after WAIT_MS. */
function once(what, register) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS);
    register((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

/** Resolves once `pred()` is true (polled), rejects after WAIT_MS. */
function until(what, pred) {
  return once(what, (done) => {
    const poll = () => (pred() ? done() : setTimeout(poll, 10));
    poll();
  });
}

function client(user) {
  const params = user ? `?user=${encodeURIComponent(user)}` : '';
  const c = new Pusher(KEY, {
    cluster: 'herald',
    wsHost: '127.0.0.1',
    wsPort: port,
    forceTLS: false,
    enabledTransports: ['ws'],
    disableStats: true,
    channelAuthorization: {
      endpoint: `http://127.0.0.1:${authPort}/pusher/auth${params}`,
      transport: 'ajax',
    },
    userAuthentication: {
      endpoint: `http://127.0.0.1:${authPort}/pusher/user-auth${params}`,
      transport: 'ajax',
    },
  });
  clients.push(c);
  return c;
}

function subscribed(c, name) {
  const ch = c.subscribe(name);
  return once(`subscription to ${name}`, (done) => {
    ch.bind('pusher:subscription_succeeded', () => done(ch));
    ch.bind('pusher:subscription_error', (e) => done(Promise.reject(new Error(JSON.stringify(e)))));
  });
}

before(async () => {
  const bin = process.env.HERALD_BIN;
  assert.ok(bin, 'HERALD_BIN must name the herald binary');
  port = await freePort();
  hookServer = http.createServer((req, res) => {
    let rawBody = '';
    req.on('data', (d) => (rawBody += d));
    req.on('end', () => {
      hooks.push({ headers: req.headers, rawBody });
      res.writeHead(200);
      res.end();
    });
  });
  await new Promise((r) => hookServer.listen(0, '127.0.0.1', r));
  const hookUrl = `http://127.0.0.1:${hookServer.address().port}/pusher/webhooks`;
  const dir = mkdtempSync(join(tmpdir(), 'herald-pusher-'));
  const config = join(dir, 'herald.toml');
  writeFileSync(
    config,
    `listen = "127.0.0.1:${port}"\n[[pusher.apps]]\nid = "1"\nkey = "${KEY}"\nsecret_env = "HERALD_TEST_PUSHER_SECRET"\nwebhook_url = "${hookUrl}"\nsubscription_count = true\n`,
  );
  herald = spawn(bin, ['serve', '--config', config], {
    env: { ...process.env, HERALD_TEST_PUSHER_SECRET: SECRET },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const deadline = Date.now() + 10000;
  for (;;) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error('herald did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  sdk = new PusherServer({
    appId: '1',
    key: KEY,
    secret: SECRET,
    host: '127.0.0.1',
    port: String(port),
    useTLS: false,
    // End-to-end encryption of private-encrypted- channels: the key never
    // reaches Herald, which relays ciphertext.
    encryptionMasterKeyBase64: randomBytes(32).toString('base64'),
  });
  // The app's auth endpoint, as an app would write it with the server SDK.
  authServer = http.createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (req.method === 'GET') {
      const asset = ASSETS[path];
      res.writeHead(asset || path === '/' ? 200 : 404, {
        'content-type': asset ? 'text/javascript' : 'text/html',
      });
      res.end(asset ? readFileSync(new URL(asset, MODULES)) : PAGE);
      return;
    }
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const user = new URL(req.url, 'http://x').searchParams.get('user');
      if (req.url.startsWith('/pusher/user-auth')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(sdk.authenticateUser(form.get('socket_id'), { id: user, user_info: { name: user } })));
        return;
      }
      const channel = form.get('channel_name');
      const presence = channel.startsWith('presence-') ? { user_id: user, user_info: { name: user } } : undefined;
      let auth = sdk.authorizeChannel(form.get('socket_id'), channel, presence);
      if (channel.includes('forged')) auth = { auth: `${KEY}:${'0'.repeat(64)}` };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(auth));
    });
  });
  await new Promise((r) => authServer.listen(0, '127.0.0.1', r));
  authPort = authServer.address().port;
});

after(async () => {
  for (const c of clients) c.disconnect();
  authServer?.close();
  hookServer?.close();
  if (herald) {
    herald.kill('SIGTERM');
    await once('herald to exit', (done) => herald.once('exit', done)).catch(() => herald.kill('SIGKILL'));
  }
});

test('pusher-js connects and receives events triggered by the server SDK', async () => {
  const c = client();
  await once('connected', (done) => c.connection.bind('connected', done));
  assert.match(c.connection.socket_id, /^\d+\.\d+$/);
  const ch = await subscribed(c, 'news');
  const got = once('event', (done) => ch.bind('greeting', done));
  await sdk.trigger('news', 'greeting', { text: 'hi' });
  assert.deepEqual(await got, { text: 'hi' });
  const batch = once('batch event', (done) => ch.bind('second', done));
  await sdk.triggerBatch([{ channel: 'news', name: 'second', data: 'plain' }]);
  assert.equal(await batch, 'plain');
});

test('subscription counts: pusher-js keeps subscriptionCount and emits pusher:subscription_count', async () => {
  const a = client();
  const ch = await subscribed(a, 'counted');
  await until('the first subscriber counted', () => ch.subscriptionCount === 1);
  const seen = [];
  ch.bind('pusher:subscription_count', (d) => seen.push(d.subscription_count));
  const b = client();
  const chB = await subscribed(b, 'counted');
  await until('both see 2', () => ch.subscriptionCount === 2 && chB.subscriptionCount === 2);
  assert.equal(seen.at(-1), 2);
  b.unsubscribe('counted');
  await until('back to 1', () => ch.subscriptionCount === 1);
  assert.equal(seen.at(-1), 1);
});

test('a Herald publication reaches pusher-js', async () => {
  const c = client();
  const ch = await subscribed(c, 'mixed');
  const got = once('event', (done) => ch.bind('from-herald', done));
  const r = await fetch(`http://127.0.0.1:${port}/api/publish`, {
    method: 'POST',
    body: JSON.stringify({ channel: 'pusher-1:mixed', data: { event: 'from-herald', data: { n: 1 } } }),
  });
  assert.equal(r.status, 200);
  assert.deepEqual(await got, { n: 1 });
});

test('private channels: the auth endpoint signs, client events reach the other client', async () => {
  const a = client();
  const b = client();
  const [ca, cb] = await Promise.all([subscribed(a, 'private-room'), subscribed(b, 'private-room')]);
  const got = once('client event', (done) => cb.bind('client-typing', done));
  assert.ok(ca.trigger('client-typing', { who: 'a' }));
  assert.deepEqual(await got, { who: 'a' });
  // A forged signature is refused.
  const bad = a.subscribe('private-forged');
  const err = await once('subscription error', (done) => bad.bind('pusher:subscription_error', done));
  assert.equal(err.type, 'AuthError');
});

test('private-encrypted channels: the SDKs encrypt and decrypt, Herald relays', async () => {
  const c = client();
  const ch = await subscribed(c, 'private-encrypted-vault');
  const got = once('decrypted event', (done) => ch.bind('secret', done));
  await sdk.trigger('private-encrypted-vault', 'secret', { code: 42 });
  assert.deepEqual(await got, { code: 42 });
});

test('presence: members, member_added and member_removed', async () => {
  const ann = client('ann');
  const bob = client('bob');
  const ca = await subscribed(ann, 'presence-lobby');
  assert.equal(ca.members.count, 1);
  assert.equal(ca.members.me.id, 'ann');
  const added = once('member_added', (done) => ca.bind('pusher:member_added', done));
  const cb = await subscribed(bob, 'presence-lobby');
  assert.equal(cb.members.count, 2);
  assert.deepEqual((await added).info, { name: 'bob' });
  const users = await sdk.get({ path: '/channels/presence-lobby/users' });
  assert.deepEqual((await users.json()).users.map((u) => u.id).sort(), ['ann', 'bob']);
  const removed = once('member_removed', (done) => ca.bind('pusher:member_removed', done));
  bob.disconnect();
  assert.equal((await removed).id, 'bob');
});

test('user authentication: signin, sendToUser, terminateUserConnections', async () => {
  const c = client('zoe');
  c.signin();
  await until('signin and the user channel', () => c.user.serverToUserChannel?.subscribed);
  assert.equal(c.user.user_data.id, 'zoe');
  const got = once('user event', (done) => c.user.bind('note', done));
  await sdk.sendToUser('zoe', 'note', { for: 'zoe' });
  assert.deepEqual(await got, { for: 'zoe' });
  const closed = once('termination', (done) =>
    c.connection.bind('state_change', ({ current }) => current !== 'connected' && done(current)),
  );
  await sdk.terminateUserConnections('zoe');
  await closed;
});

function echo(user) {
  const e = new Echo({
    broadcaster: 'pusher',
    Pusher,
    key: KEY,
    cluster: 'herald',
    wsHost: '127.0.0.1',
    wsPort: port,
    forceTLS: false,
    enabledTransports: ['ws'],
    disableStats: true,
    authEndpoint: `http://127.0.0.1:${authPort}/pusher/auth?user=${encodeURIComponent(user)}`,
  });
  clients.push({ disconnect: () => e.disconnect() });
  return e;
}

test('laravel-echo: listen (Laravel event names), whisper, presence here/joining/leaving', async () => {
  const ann = echo('ann');
  const bob = echo('bob');
  const orders = ann.channel('orders');
  await once('echo subscription', (done) => orders.subscribed(done));
  const shipped = once('OrderShipped', (done) => orders.listen('OrderShipped', done));
  await sdk.trigger('orders', 'App\\Events\\OrderShipped', { id: 7 });
  assert.deepEqual(await shipped, { id: 7 });

  const [ra, rb] = [ann.private('room'), bob.private('room')];
  await Promise.all([
    once('ann in room', (done) => ra.subscribed(done)),
    once('bob in room', (done) => rb.subscribed(done)),
  ]);
  const whisper = once('whisper', (done) => rb.listenForWhisper('typing', done));
  ra.whisper('typing', { who: 'ann' });
  assert.deepEqual(await whisper, { who: 'ann' });

  const here = once('here', (done) => ann.join('chat').here(done));
  assert.deepEqual((await here).map((u) => u.name), ['ann']);
  const joining = once('joining', (done) => ann.join('chat').joining(done));
  const leaving = once('leaving', (done) => ann.join('chat').leaving(done));
  bob.join('chat');
  assert.deepEqual(await joining, { name: 'bob' });
  bob.leave('chat');
  assert.deepEqual(await leaving, { name: 'bob' });
});

test('webhooks: the server SDK validates them and reads their events', async () => {
  const c = client('wendy');
  await subscribed(c, 'presence-hooked');
  const events = () =>
    hooks.flatMap((h) => {
      const w = sdk.webhook(h);
      assert.ok(w.isValid(), 'signed with the app secret');
      return w.getEvents();
    });
  await until('member_added webhook', () =>
    events().some((e) => e.name === 'member_added' && e.channel === 'presence-hooked' && e.user_id === 'wendy'),
  );
  assert.ok(events().some((e) => e.name === 'channel_occupied' && e.channel === 'presence-hooked'));
  c.unsubscribe('presence-hooked');
  await until('channel_vacated webhook', () =>
    events().some((e) => e.name === 'channel_vacated' && e.channel === 'presence-hooked'),
  );
});

test('laravel-echo in Chromium: listen, whisper, presence', async (t) => {
  if (!existsSync(CHROMIUM)) {
    if (process.env.CI === 'true') throw new Error(`no Chromium at ${CHROMIUM}`);
    t.skip(`no Chromium at ${CHROMIUM}`);
    return;
  }
  const profile = mkdtempSync(join(tmpdir(), 'herald-pusher-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  try {
    const open = async (user) => {
      const page = await context.newPage();
      await page.goto(`http://127.0.0.1:${authPort}/`);
      await page.evaluate(
        ([key, port, user]) => {
          window.got = [];
          window.echo = new Echo.default({
            broadcaster: 'pusher',
            key,
            cluster: 'herald',
            wsHost: '127.0.0.1',
            wsPort: port,
            forceTLS: false,
            enabledTransports: ['ws'],
            disableStats: true,
            authEndpoint: `/broadcasting/auth?user=${user}`,
          });
        },
        [KEY, port, user],
      );
      return page;
    };
    const [ann, bob] = [await open('ann'), await open('bob')];
    const wait = (page, what, fn) => page.waitForFunction(fn, null, { timeout: WAIT_MS }).catch(() => {
      throw new Error(`timed out in Chromium waiting for ${what}`);
    });
    await ann.evaluate(() => {
      const orders = window.echo.channel('browser-orders');
      orders.subscribed(() => (window.ordersReady = true));
      orders.listen('OrderShipped', (e) => window.got.push(e));
      window.echo.private('browser-room').subscribed(() => (window.roomReady = true));
      window.echo.join('browser-lobby').here((users) => (window.here = users)).joining((u) => (window.joined = u));
    });
    await bob.evaluate(() => {
      window.echo.private('browser-room').subscribed(() => (window.roomReady = true))
        .listenForWhisper('typing', (e) => (window.whisper = e));
    });
    await wait(ann, 'the subscriptions', () => window.ordersReady && window.roomReady && window.here);
    await wait(bob, 'the private subscription', () => window.roomReady);
    await sdk.trigger('browser-orders', 'App\\Events\\OrderShipped', { id: 9 });
    await wait(ann, 'OrderShipped', () => window.got.length === 1);
    assert.deepEqual(await ann.evaluate(() => window.got[0]), { id: 9 });
    assert.deepEqual(await ann.evaluate(() => window.here.map((u) => u.name)), ['ann']);
    await ann.evaluate(() => window.echo.private('browser-room').whisper('typing', { who: 'ann' }));
    await wait(bob, 'the whisper', () => window.whisper);
    assert.deepEqual(await bob.evaluate(() => window.whisper), { who: 'ann' });
    await bob.evaluate(() => window.echo.join('browser-lobby'));
    await wait(ann, 'bob joining', () => window.joined);
    assert.deepEqual(await ann.evaluate(() => window.joined), { name: 'bob' });
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
});

test('the server SDK queries channels; a wrong secret is refused', async () => {
  const c = client();
  await subscribed(c, 'listed');
  const r = await sdk.get({ path: '/channels', params: { filter_by_prefix: 'list' } });
  assert.deepEqual(await r.json(), { channels: { listed: {} } });
  const info = await sdk.get({ path: '/channels/listed', params: { info: 'subscription_count' } });
  assert.deepEqual(await info.json(), { occupied: true, subscription_count: 1 });
  const wrong = new PusherServer({ appId: '1', key: KEY, secret: 'wrong', host: '127.0.0.1', port: String(port), useTLS: false });
  await assert.rejects(wrong.trigger('listed', 'e', {}), (e) => e.status === 401);
});
