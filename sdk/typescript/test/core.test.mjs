// The I/O-free state machine: states, recovery positions, duplicate removal.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ClientCore, DisconnectCode, channelMatches, codeName } from "../dist/index.js";

function connected() {
  const core = new ClientCore("tok", null);
  const connect = core.startConnect();
  assert.equal(core.state, "connecting");
  assert.equal(connect.token, "tok");
  const ev = core.receive({ type: "connectReply", id: connect.id, client: "c1", version: "v", pingInterval: 25 });
  assert.equal(ev[0].type, "connected");
  assert.equal(core.state, "connected");
  return core;
}

test("recovery: re-subscribe sends the last position, recovered items are deduplicated", () => {
  const core = connected();
  const sub = core.addSubscription("news");
  const cmd = core.subscribeCommand(sub);
  assert.equal(cmd.recover, null);
  core.receive({ type: "subscribeReply", id: cmd.id, epoch: "e", offset: 4, recovered: false, publications: [] });
  const pub = (offset) => ({ type: "publication", channel: "news", offset, data: new Uint8Array([49]) });
  assert.equal(core.receive(pub(5)).length, 1);
  assert.equal(core.receive(pub(5)).length, 0, "duplicate skipped");
  assert.equal(core.receive(pub(6)).length, 1);
  assert.equal(core.connectionLost(null), true);
  assert.equal(core.state, "disconnected");
  const c2 = core.startConnect();
  core.receive({ type: "connectReply", id: c2.id, client: "c2", version: "v", pingInterval: 25 });
  const [re] = core.resubscribeCommands();
  assert.deepEqual(re.recover, { epoch: "e", offset: 6 });
  const items = [5, 6, 7, 8].map((offset) => ({ offset, data: new Uint8Array([offset]) }));
  const ev = core.receive({ type: "subscribeReply", id: re.id, epoch: "e", offset: 8, recovered: true, publications: items });
  assert.equal(ev[0].type, "subscribed");
  assert.equal(ev[0].subscribed.needsResync, false);
  assert.deepEqual(ev.slice(1).map((e) => e.publication.offset), [7, 8]);
});

test("a refused reconnect ends in the closed state; close() is final", () => {
  const core = connected();
  assert.equal(core.connectionLost(3500), false);
  assert.equal(core.state, "closed");
  assert.throws(() => core.startConnect(), /closed/);
});

test("3004 broker state lost (and an unknown 3xxx code below 3500): reconnect and recover", () => {
  assert.equal(DisconnectCode.BrokerStateLost, 3004);
  assert.equal(codeName(3004), "BrokerStateLost");
  for (const code of [DisconnectCode.BrokerStateLost, 3277]) {
    const core = connected();
    const sub = core.addSubscription("news");
    const cmd = core.subscribeCommand(sub);
    core.receive({ type: "subscribeReply", id: cmd.id, epoch: "e", offset: 7, recovered: false, publications: [] });
    // SSE and long-polling get the code in a disconnect push, WebSocket as its close code.
    const [ev] = core.receive({ type: "disconnect", code, reason: "broker state lost" });
    assert.equal(ev.type, "serverDisconnect");
    assert.equal(core.connectionLost(code), true, String(code));
    assert.equal(core.state, "disconnected");
    assert.equal(sub.active, false);
    const c2 = core.startConnect();
    core.receive({ type: "connectReply", id: c2.id, client: "c2", version: "v", pingInterval: 25 });
    const [re] = core.resubscribeCommands();
    assert.deepEqual(re.recover, { epoch: "e", offset: 7 }, "re-subscribes with recovery");
    // The recovery says whether anything was lost: here it was.
    const [done] = core.receive({ type: "subscribeReply", id: re.id, epoch: "e", offset: 9, recovered: false, publications: [] });
    assert.equal(done.subscribed.needsResync, true);
  }
});

test("an unrecovered re-subscription asks for a resync", () => {
  const core = connected();
  const sub = core.addSubscription("a");
  const cmd = core.subscribeCommand(sub);
  core.receive({ type: "subscribeReply", id: cmd.id, epoch: "e1", offset: 2, recovered: false, publications: [] });
  core.connectionLost(1001);
  const c2 = core.startConnect();
  core.receive({ type: "connectReply", id: c2.id, client: "c", version: "v", pingInterval: 25 });
  const [re] = core.resubscribeCommands();
  const [ev] = core.receive({ type: "subscribeReply", id: re.id, epoch: "e2", offset: 0, recovered: false, publications: [] });
  assert.equal(ev.subscribed.needsResync, true);
  assert.deepEqual(sub.position, { epoch: "e2", offset: 0 });
});

test("wildcard matching follows §5a", () => {
  assert.ok(channelMatches("news.*", "news.sport"));
  assert.ok(!channelMatches("news.*", "news"));
  assert.ok(!channelMatches("news.*", "news.sport.uk"));
  assert.ok(channelMatches("news.>", "news.sport.uk"));
  assert.ok(!channelMatches("news.>", "news"));
  assert.ok(channelMatches(">", "a"));
});
