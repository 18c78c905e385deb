// End-to-end: the games page (/games.html) served by a real `herald serve`
// running the repository's game modules (games/dist/liars-dice.js as "dice",
// games/dist/snake.js as "snake"), in headless Chromium (Debian's
// `chromium`, driven by playwright-core), each time against a Node peer
// that plays through the TypeScript SDK with the module's own `bot`.
// - Liar's Dice (the page opened without ?game=: the first game in the
//   lobby): the page lists the table, sits, shows its own five dice and
//   never the peer's before a call reveals them, shows a refused bid's
//   error, bids by clicking, and shows the round's result once someone calls.
// - Snake: the canvas follows the ticks, an arrow key (and an on-screen
//   button) turns our snake, and the peer's snake is drawn too.
// - Rock-paper-scissors ("rps", games/dist/rps.js): a pick by clicking is
//   revealed with the bot's.
// - Any game as JSON (`?kind=json`): watching shows the snapshot and the
//   messages.
// - "Play now" (`play`): the page gets a table made on demand for its game,
//   which a peer asking for the same game then shares.
// Screenshots go to web/artifacts/ (or $HERALD_ARTIFACTS).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Server } from "../../sdk/typescript/test/helpers.mjs";
import { ARTIFACTS, launchBrowser } from "./browser.mjs";
import { ModulePeer } from "./module_peer.mjs";

const GAMES = fileURLToPath(new URL("../../games/dist/", import.meta.url));

// Liar's Dice: a turn timer long enough for a browser driven by a test (it
// would otherwise bid or call for the page), a match soon after two sit.
// Snake: 10 ticks a second, a goal nobody reaches during the test, a quick
// respawn.
const dir = mkdtempSync(join(tmpdir(), "herald-games-"));
const config = join(dir, "herald.toml");
writeFileSync(
  config,
  [
    "[[games]]",
    'name = "dice"',
    `module = ${JSON.stringify(join(GAMES, "liars-dice.js"))}`,
    "",
    "[[games]]",
    'name = "snake"',
    `module = ${JSON.stringify(join(GAMES, "snake.js"))}`,
    "",
    "[[tables]]",
    'game = "dice"',
    "seats = 2",
    "turn_ms = 60000",
    "start_ms = 300",
    "",
    "[[tables]]",
    'game = "snake"',
    "seats = 2",
    "tick_ms = 100",
    "goal = 500",
    "respawn_ms = 300",
    "",
    "[[games]]",
    'name = "rps"',
    `module = ${JSON.stringify(join(GAMES, "rps.js"))}`,
    "",
    "[[tables]]",
    'game = "rps"',
    "seats = 2",
    "",
  ].join("\n"),
);
const server = new Server(["--config", config]);
const dice = await import(join(GAMES, "liars-dice.js"));
const snake = await import(join(GAMES, "snake.js"));
const rps = await import(join(GAMES, "rps.js"));
let context;
let browser;
const peers = [];

async function waitFor(cond, what, timeout = 20_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  await server.start();
  browser = await launchBrowser(1400, 1000);
  context = browser.context;
});

after(async () => {
  await browser?.close();
  for (const p of peers) p.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A peer playing `mod`'s bot, seated at the only table of `game`. */
async function seatedPeer(mod, game) {
  const peer = new ModulePeer(server.wsUrl, mod.bot, `${game} peer`);
  peers.push(peer);
  await peer.connect();
  const { tables } = await peer.client.lobby(game);
  assert.equal(tables.length, 1, `one ${game} table configured`);
  await peer.sit(tables[0].table);
  return peer;
}

/** Opens the page for `game`, waits until it is connected and lists the
 * peer's table with one player, and returns the page and that row. */
async function openPage(query, peer, errors) {
  const page = await context.newPage();
  page.on("pageerror", (e) => errors.push(e));
  await page.goto(`${server.url}/games.html${query}`);
  await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 });
  assert.equal(await page.textContent("#state"), "connected");
  const row = `#lobby tr[data-table="${peer.table}"]`;
  await page.waitForSelector(`${row}[data-players="1"]`, { timeout: 20_000 });
  return { page, row };
}

test("Liar's Dice: the page sits against a bot, sees only its own five dice, bids by clicking and shows the round's result", async () => {
  const peer = await seatedPeer(dice, "dice");
  const errors = [];
  // No ?game=: the first game in the lobby, table 1's.
  const { page, row } = await openPage("", peer, errors);
  try {
    assert.equal(await page.textContent("#game-name"), "dice");
    const rowText = await page.textContent(row);
    assert.match(rowText, /dice\/2-seat\//, "the path");
    assert.match(rowText, /1\/2/, "players/seats");
    assert.match(rowText, /waiting: true/, "the module's lobby attribute");

    await page.click(`${row} button.sit`);
    await page.waitForSelector("#game-panel[data-seat][data-kind='dice']", { timeout: 20_000 });
    const seat = Number(await page.getAttribute("#game-panel", "data-seat"));
    assert.notEqual(seat, peer.seat);

    // The match starts: five dice of our own, a count of five for the peer.
    await page.waitForFunction(() => document.getElementById("my-dice").dataset.dice.split(" ").filter(Boolean).length === 5, null, { timeout: 20_000 });
    const mine = (await page.getAttribute("#my-dice", "data-dice")).split(" ").map(Number);
    for (const d of mine) assert.ok(d >= 1 && d <= 6, `a die ${d}`);
    assert.equal(await page.locator("#my-dice .die").count(), 5);
    await page.waitForSelector(`#dice-players tr[data-seat="${peer.seat}"][data-count="5"]`, { timeout: 5_000 });
    // Hidden information: no die drawn but ours, and the peer's row has a count only.
    assert.equal(await page.locator("#game-view .die").count(), 5, "no die on the page but our own");
    assert.doesNotMatch(await page.textContent(`#dice-players tr[data-seat="${peer.seat}"]`), /[⚀⚁⚂⚃⚄⚅]/);

    // Our turn (the peer's bot plays at once when it is first): a bid above
    // the dice in play is refused with 118 and shown; then a bid by clicking;
    // then, facing the bot's raise, a call. Until a liar call resolves the round.
    await page.waitForSelector("#dice-actions[data-mine='true']", { timeout: 20_000 });
    await page.screenshot({ path: join(ARTIFACTS, "games-dice-turn.png"), fullPage: true });
    const preset = await page.inputValue("#bid-count");
    await page.fill("#bid-count", "11");
    await page.click("#bid-submit");
    await page.waitForFunction(() => /refused: 118/.test(document.getElementById("act-error").textContent), null, { timeout: 10_000 });
    assert.match(await page.textContent("#act-error"), /bid from 1 to 10 dice/);
    await page.waitForSelector("#dice-actions[data-mine='true']", { timeout: 10_000 });
    await page.fill("#bid-count", preset);

    let bids = 0;
    let calls = 0;
    for (;;) {
      await page.waitForFunction(
        () => document.getElementById("dice-actions").dataset.mine === "true" || Number(document.getElementById("rounds").dataset.count) >= 1,
        null,
        { timeout: 20_000 },
      );
      if (Number(await page.getAttribute("#rounds", "data-count")) >= 1) break;
      // Still before any reveal: our dice only.
      assert.equal(await page.locator("#game-view .die").count(), 5);
      if (bids === 0) {
        const count = Number(await page.inputValue("#bid-count"));
        const face = Number(await page.inputValue("#bid-face"));
        await page.selectOption("#bid-face", String(face));
        await page.click("#bid-submit");
        // The peer may answer at once, so the bid is checked where it landed.
        await waitFor(() => peer.heard("bid").some((b) => b.seat === seat && b.count === count && b.face === face && !b.auto), "our bid at the peer", 10_000);
        // (The click turned the controls off at once: the loop waits for our next turn.)
        bids++;
      } else {
        await page.click("#call-liar");
        calls++;
      }
      assert.ok(bids + calls < 4, "the round ends by our second action at the latest");
    }
    assert.equal(bids, 1, "the page bid once by clicking");
    assert.equal(await page.textContent("#act-error"), "");
    assert.deepEqual(peer.errors, []);

    // The result, as the peer heard it, on the page with both rolls.
    const call = peer.heard("liar")[0];
    assert.ok(call, "the peer heard the call");
    assert.ok(call.seat === seat || call.seat === peer.seat);
    const li = page.locator("#rounds li[data-round='1']");
    const text = await li.textContent();
    assert.match(text, /^Round 1: seat \d \((you|~\d+)\) called seat \d \((you|~\d+)\)'s \d+ × \d: \d+ matched — seat \d \((you|~\d+)\) loses a die\./);
    assert.equal(await li.getAttribute("data-loser"), String(call.loser));
    assert.equal(await li.locator(`.dice[data-seat="${peer.seat}"] .die`).count(), 5, "the peer's dice, revealed");
    const revealed = await li.locator(`.dice[data-seat="${peer.seat}"] .die`).evaluateAll((ds) => ds.map((d) => Number(d.dataset.face)));
    assert.deepEqual(revealed, call.dice[peer.seat]);
    assert.deepEqual(call.dice[seat], mine, "the dice the page showed are the ones revealed");
    // What reached the page before the call: our roll, never the peer's.
    const received = await page.evaluate(() => window.herald.received());
    const before = received.slice(0, received.findIndex((m) => m.t === "liar"));
    const rolls = before.filter((m) => m.t === "dice");
    assert.equal(rolls.length, 1, "one roll, ours");
    assert.deepEqual(rolls[0].dice, mine);

    // The next round: the loser has four dice.
    await page.waitForSelector(`#dice-players tr[data-seat="${call.loser}"][data-count="4"]`, { timeout: 10_000 });
    await page.screenshot({ path: join(ARTIFACTS, "games-dice.png"), fullPage: true });

    // Stand up: the lobby shows one player again.
    await page.click("#stand");
    await page.waitForSelector("#game-panel:not([data-table])", { timeout: 10_000 });
    await page.waitForSelector(`${row}[data-players="1"]`, { timeout: 10_000 });
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});

test("Snake: the canvas follows the ticks, arrow keys and buttons steer, and the peer's snake is drawn", async () => {
  const peer = await seatedPeer(snake, "snake");
  const errors = [];
  const { page, row } = await openPage("?game=snake", peer, errors);
  try {
    await page.click(`${row} button.sit`);
    await page.waitForSelector("#game-panel[data-seat][data-kind='snake']", { timeout: 20_000 });
    const seat = Number(await page.getAttribute("#game-panel", "data-seat"));
    const board = "#snake-board";
    const read = () => page.evaluate(() => ({ ...document.getElementById("snake-board").dataset }));

    // Our snake is placed by a tick and moves with the next ones.
    await page.waitForFunction(() => document.getElementById("snake-board").dataset.head !== "", null, { timeout: 20_000 });
    const first = await read();
    await page.waitForFunction((n) => Number(document.getElementById("snake-board").dataset.tick) >= n + 3, Number(first.tick), { timeout: 10_000 });
    const second = await read();
    assert.ok(Number(second.tick) > Number(first.tick), `ticks ${first.tick} → ${second.tick}`);
    assert.notEqual(second.head, first.head, "the head moved");

    // The peer's snake is drawn: its seat is listed as drawn, and the
    // canvas shows its colour at its head's cell.
    await page.waitForFunction((s) => document.getElementById("snake-board").dataset.drawn.split(" ").includes(String(s)), peer.seat, { timeout: 10_000 });
    const colour = ["#2b6cb0", "#c05621"][peer.seat];
    let pixel = null;
    await waitFor(async () => {
      // The canvas and the last tick it was drawn from, read together (null while the peer's snake is dead).
      pixel = await page.evaluate((s) => {
        const c = document.getElementById("snake-board");
        const tick = window.herald.received().filter((m) => m.t === "tick").at(-1);
        const head = tick?.s[s]?.[0];
        if (head === undefined) return null;
        const w = c.width / 16;
        const [r, g, b] = c.getContext("2d").getImageData((head % w) * 16 + 8, Math.floor(head / w) * 16 + 8, 1, 1).data;
        return `#${[r, g, b].map((v) => v.toString(16).padStart(2, "0")).join("")}`;
      }, peer.seat);
      return pixel !== null;
    }, "the peer's snake alive on the canvas", 10_000);
    assert.equal(pixel, colour, "the peer's head drawn in its colour");

    // Steering: turn to a side with room (the snake may die meanwhile; then
    // wait for its respawn and try again), first with a key, then a button.
    const { w, h } = await page.evaluate(() => ({ w: document.getElementById("snake-board").width / 16, h: document.getElementById("snake-board").height / 16 }));
    const turnTo = async (how) => {
      for (let attempt = 0; attempt < 5; attempt++) {
        await page.waitForFunction(() => document.getElementById("snake-board").dataset.dir !== "", null, { timeout: 10_000 });
        const now = await read();
        const head = Number(now.head);
        const [x, y] = [head % w, Math.floor(head / w)];
        const choices = now.dir === "up" || now.dir === "down" ? [["left", x], ["right", w - 1 - x]] : [["up", y], ["down", h - 1 - y]];
        const [dir] = choices.sort((a, b) => b[1] - a[1])[0];
        if (how === "key") await page.keyboard.press({ up: "ArrowUp", down: "ArrowDown", left: "ArrowLeft", right: "ArrowRight" }[dir]);
        else await page.click(`#dir-${dir}`);
        try {
          await page.waitForFunction((d) => document.getElementById("snake-board").dataset.dir === d, dir, { timeout: 3_000 });
          return dir;
        } catch {
          // died (or refused while respawning): try again
        }
      }
      throw new Error(`could not turn by ${how}`);
    };
    const byKey = await turnTo("key");
    const afterKey = Number((await read()).tick);
    await page.waitForFunction((n) => Number(document.getElementById("snake-board").dataset.tick) >= n + 2, afterKey, { timeout: 5_000 });
    assert.ok(["up", "down", "left", "right"].includes(byKey));
    await page.screenshot({ path: join(ARTIFACTS, "games-snake.png"), fullPage: true });
    await turnTo("button");
    assert.match(await page.textContent("#snake-legend"), new RegExp(`seat ${seat} \\(you\\)`));
    assert.match(await page.textContent("#snake-status"), /match \d+ · tick \d+/);

    await page.click("#stand");
    await page.waitForSelector("#game-panel:not([data-table])", { timeout: 10_000 });
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});

test("any game as JSON: watching the snake table with ?kind=json shows the snapshot and the messages", async () => {
  const errors = [];
  const peer = peers.find((p) => p.table !== null && p.snapshot?.t === "board");
  assert.ok(peer, "the snake peer is still seated");
  const { page, row } = await openPage("?game=snake&kind=json", peer, errors);
  try {
    await page.click(`${row} button.watch`);
    await page.waitForSelector("#game-panel[data-kind='json']", { timeout: 20_000 });
    assert.match(await page.textContent("#json-snapshot"), /"t": "board"/);
    await page.waitForFunction(() => Number(document.getElementById("json-log").dataset.count) >= 3, null, { timeout: 10_000 });
    assert.match(await page.textContent("#json-log"), /"t":"tick"/);
    assert.equal(await page.isVisible("#json-form"), false, "a watcher has no action box");
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});

test("RPS: the page picks by clicking and the reveal shows both picks", async () => {
  const peer = await seatedPeer(rps, "rps");
  const errors = [];
  const { page, row } = await openPage("?game=rps", peer, errors);
  try {
    await page.click(`${row} button.sit`);
    await page.waitForSelector("#game-panel[data-seat][data-kind='rps']", { timeout: 20_000 });
    const seat = Number(await page.getAttribute("#game-panel", "data-seat"));
    await page.click("#rps-rock");
    await page.waitForFunction(() => Number(document.getElementById("rps-reveals").dataset.count) >= 1, null, { timeout: 10_000 });
    const reveal = peer.heard("reveal")[0];
    assert.equal(reveal.picks[seat], "rock");
    const text = await page.textContent("#rps-reveals li");
    assert.match(text, /you: rock/);
    assert.match(text, new RegExp(`seat ${peer.seat}: ${reveal.picks[peer.seat]}`));
    assert.match(text, reveal.w === null ? /a draw/ : reveal.w === seat ? /you win/ : new RegExp(`seat ${peer.seat} wins`));
    // The next round's score, from the `round` that follows the reveal.
    const score = [0, 0];
    if (reveal.w !== null) score[reveal.w] = 1;
    await page.waitForSelector(`#rps-score[data-score="${score.join("-")}"]`, { timeout: 5_000 });
    await page.screenshot({ path: join(ARTIFACTS, "games-rps.png"), fullPage: true });
    assert.equal(await page.textContent("#act-error"), "");
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
});

test("Play now: the page gets a table of its game made by play, and a peer asking the same shares it", async () => {
  const errors = [];
  const page = await context.newPage();
  page.on("pageerror", (e) => errors.push(e));
  try {
    await page.goto(`${server.url}/games.html?game=rps`);
    await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 });
    assert.equal(await page.inputValue("#play-seats"), "2", "the seat count of the table listed");
    await page.click("#play-now");
    await page.waitForSelector("#game-panel[data-seat][data-kind='rps']", { timeout: 20_000 });
    const table = Number(await page.getAttribute("#game-panel", "data-table"));
    const seat = Number(await page.getAttribute("#game-panel", "data-seat"));
    const peer = new ModulePeer(server.wsUrl, rps.bot, "rps play peer");
    peers.push(peer);
    await peer.connect();
    const reply = await peer.play({ game: "rps", seats: 2 });
    assert.equal(reply.table, table);
    assert.equal(reply.created, false);
    assert.notEqual(reply.seat, seat);
    // The game runs: a pick by clicking is revealed with the peer's.
    await page.click("#rps-rock");
    await page.waitForFunction(() => Number(document.getElementById("rps-reveals").dataset.count) >= 1, null, { timeout: 10_000 });
    assert.equal(peer.heard("reveal")[0].picks[seat], "rock");
    // Listed with both players; seated through play only, so no Sit button.
    const row = `#lobby tr[data-table="${table}"]`;
    await page.waitForSelector(`${row}[data-players="2"]`, { timeout: 20_000 });
    assert.equal(await page.locator(`${row} button.sit`).count(), 0);
    assert.equal(await page.locator(`${row} button.watch`).count(), 1);
    await page.screenshot({ path: join(ARTIFACTS, "games-play-now.png"), fullPage: true });
    assert.equal(await page.textContent("#act-error"), "");
    assert.deepEqual(errors, []);
    assert.deepEqual(peer.errors, []);
  } finally {
    await page.close();
  }
});
