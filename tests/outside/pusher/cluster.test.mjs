// Herald's Pusher endpoint in a cluster (issue 16, decision 0012), checked
// with Pusher's own libraries: two `herald serve` nodes (HERALD_BIN) on one
// real `redis-server`, pusher-js clients on each, the `pusher` server SDK
// asking either node and validating the webhooks both nodes send to one
// receiver. Then one node is killed (SIGKILL) and its member must go.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { freePort, Redis } from '../harness.mjs';
import Pusher from 'pusher-js';
import PusherServer from 'pusher';

const KEY = 'cluster-key';
const SECRET = 'cluster-secret-' + Math.random().toString(36).slice(2);
const WAIT_MS = 5000;
// A killed node is forgotten after 5 s of silence, plus a heartbeat or two.
const DEAD_MS = 15000;

let redis, dir, authServer, authPort, hookServer, hookUrl;
const nodes = []; // {proc, port, sdk}
const clients = [];
// Webhook events as received and validated: {name, channel, user_id?}.
const hooks = [];

function once(what, register, ms = WAIT_MS) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    register((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

function until(what, pred, ms = WAIT_MS) {
  return once(what, (done) => {
    const poll = () => (pred() ? done() : setTimeout(poll, 10));
    poll();
  }, ms);
}

async function startNode(redisPort) {
  const port = await freePort();
  const config = join(dir, `herald-${port}.toml`);
  writeFileSync(
    config,
    `listen = "127.0.0.1:${port}"\nbroker = "redis://127.0.0.1:${redisPort}"\n` +
      `[[pusher.apps]]\nid = "1"\nkey = "${KEY}"\nsecret_env = "HERALD_TEST_PUSHER_SECRET"\nwebhook_url = "${hookUrl}"\nsubscription_count = true\n`,
  );
  const proc = spawn(process.env.HERALD_BIN, ['serve', '--config', config], {
    env: { ...process.env, HERALD_TEST_PUSHER_SECRET: SECRET },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const sdk = new PusherServer({ appId: '1', key: KEY, secret: SECRET, host: '127.0.0.1', port: String(port), useTLS: false });
  return { proc, port, sdk };
}

/** Waits until node `n` is ready (reaches Redis) and sees `count` nodes. */
async function ready(n, count) {
  const deadline = Date.now() + 10000;
  for (;;) {
    try {
      const r = await fetch(`http://127.0.0.1:${n.port}/api/nodes`);
      if (r.ok && (await r.json()).nodes?.length === count) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`node ${n.port} did not join the cluster`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function client(node, user) {
  const c = new Pusher(KEY, {
    cluster: 'herald',
    wsHost: '127.0.0.1',
    wsPort: node.port,
    forceTLS: false,
    enabledTransports: ['ws'],
    disableStats: true,
    channelAuthorization: {
      endpoint: `http://127.0.0.1:${authPort}/pusher/auth?user=${encodeURIComponent(user)}`,
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
  assert.ok(process.env.HERALD_BIN, 'HERALD_BIN must name the herald binary');
  dir = mkdtempSync(join(tmpdir(), 'herald-pusher-cluster-'));
  redis = await Redis.start();
  const redisPort = redis.port;
  const signer = new PusherServer({ appId: '1', key: KEY, secret: SECRET, host: '127.0.0.1', useTLS: false });
  hookServer = http.createServer((req, res) => {
    let rawBody = '';
    req.on('data', (d) => (rawBody += d));
    req.on('end', () => {
      const hook = signer.webhook({ headers: req.headers, rawBody });
      assert.ok(hook.isValid(), 'webhook signature');
      hooks.push(...hook.getEvents());
      res.writeHead(200);
      res.end();
    });
  });
  await new Promise((r) => hookServer.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${hookServer.address().port}/hooks`;
  authServer = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const user = new URL(req.url, 'http://x').searchParams.get('user');
      const auth = signer.authorizeChannel(form.get('socket_id'), form.get('channel_name'), {
        user_id: user,
        user_info: { name: user },
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(auth));
    });
  });
  await new Promise((r) => authServer.listen(0, '127.0.0.1', r));
  authPort = authServer.address().port;
  nodes.push(await startNode(redisPort), await startNode(redisPort));
  await Promise.all(nodes.map((n) => ready(n, 2)));
});

after(async () => {
  for (const c of clients) c.disconnect();
  authServer?.close();
  hookServer?.close();
  for (const n of nodes) {
    if (n.proc.exitCode === null && n.proc.signalCode === null) {
      n.proc.kill('SIGTERM');
      await once('herald to exit', (done) => n.proc.once('exit', done)).catch(() => n.proc.kill('SIGKILL'));
    }
  }
  await redis?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('subscription counts are the cluster\'s: pusher-js on either node counts both', async () => {
  const [a, b] = nodes;
  const cathy = client(a, 'cathy');
  const dan = client(b, 'dan');
  const chA = await subscribed(cathy, 'counted');
  const chB = await subscribed(dan, 'counted');
  await until('both see 2', () => chA.subscriptionCount === 2 && chB.subscriptionCount === 2);
  dan.unsubscribe('counted');
  await until('node A sees 1', () => chA.subscriptionCount === 1);
  cathy.unsubscribe('counted');
});

test('two nodes are one Pusher server: members, events, channels API, webhooks, a killed node', async () => {
  const [a, b] = nodes;
  const ann = client(a, 'ann');
  const bob = client(b, 'bob');
  const lobbyA = await subscribed(ann, 'presence-lobby');
  const added = once('member_added on node A', (done) => lobbyA.bind('pusher:member_added', done));
  const lobbyB = await subscribed(bob, 'presence-lobby');
  // Bob, on node B, sees Ann, who is on node A; she sees him come.
  assert.equal(lobbyB.members.count, 2);
  assert.deepEqual(lobbyB.members.get('ann').info, { name: 'ann' });
  assert.deepEqual((await added).info, { name: 'bob' });

  // An event triggered through node A reaches Bob on node B.
  const got = once('event on node B', (done) => lobbyB.bind('news', done));
  await a.sdk.trigger('presence-lobby', 'news', { n: 1 });
  assert.deepEqual(await got, { n: 1 });

  // Either node answers for the cluster.
  for (const n of nodes) {
    const users = await (await n.sdk.get({ path: '/channels/presence-lobby/users' })).json();
    assert.deepEqual(users.users.map((u) => u.id).sort(), ['ann', 'bob']);
    const info = await (await n.sdk.get({ path: '/channels/presence-lobby', params: { info: 'user_count,subscription_count' } })).json();
    assert.deepEqual(info, { occupied: true, user_count: 2, subscription_count: 2 });
  }

  // Node B dies: Ann hears Bob leave, and the webhooks say so once.
  const removed = once('member_removed on node A', (done) => lobbyA.bind('pusher:member_removed', done), DEAD_MS);
  b.proc.kill('SIGKILL');
  assert.equal((await removed).id, 'bob');
  const summary = () =>
    hooks.filter((e) => e.channel === 'presence-lobby').map((e) => `${e.name} ${e.channel} ${e.user_id ?? ''}`.trim());
  await until('the member_removed webhook', () => summary().includes('member_removed presence-lobby bob'));
  // Give a duplicate the time to show up before counting.
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(summary().sort(), [
    'channel_occupied presence-lobby',
    'member_added presence-lobby ann',
    'member_added presence-lobby bob',
    'member_removed presence-lobby bob',
  ]);
});
