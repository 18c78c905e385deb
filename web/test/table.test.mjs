// End-to-end: the poker page (/table.html) served by a real `herald serve`
// with one heads-up Hold'em table, in headless Chromium (Debian's
// `chromium`, driven by playwright-core), against a bot using the TypeScript
// SDK that checks or calls. The page must list the table from the live
// lobby, sit, show its two hole cards, play a whole hand to its result by
// clicking the action buttons (a raise among them), chat with the bot both
// ways on `table:{id}`, and stand up. A screenshot goes to web/artifacts/
// (or $HERALD_ARTIFACTS).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server } from "../../sdk/typescript/test/helpers.mjs";
import { ARTIFACTS, launchBrowser } from "./browser.mjs";
import { PokerBot } from "./poker_bot.mjs";


// One heads-up table: super-express, but with time for a browser driven by a
// test to act (the timer would otherwise check or fold for it), a pause
// between hands long enough to look at the result, and a fixed deck.
const BUYIN = 1000;
const dir = mkdtempSync(join(tmpdir(), "herald-table-"));
const config = join(dir, "herald.toml");
writeFileSync(
  config,
  [
    "[[tables]]",
    'game = "holdem"',
    "seats = 2",
    'timing = "super-express"',
    "action_ms = 30000",
    "hand_ms = 3000",
    "seed = 7",
    "big_blind = 10",
    `buyin = ${BUYIN}`,
    "",
  ].join("\n"),
);
const server = new Server(["--config", config]);
let context;
let browser;
let bot;

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
  bot = new PokerBot(server.wsUrl);
  await bot.connect();
  browser = await launchBrowser(1400, 900);
  context = browser.context;
});

after(async () => {
  await browser?.close();
  bot?.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

const CARD = /^[2-9TJQKA][cdhs]$/;

let table;

/** Opens the page at `path`, sits at the table, plays one whole hand by
 * clicking, chats with the bot and stands up; checks what the page shows. */
async function playAHand(path, expectedTransport, shot) {
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  try {
    await page.goto(`${server.url}${path}`);
    await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 });
    assert.equal(await page.textContent("#state"), "connected");
    assert.equal(await page.textContent("#transport"), expectedTransport);

    // The lobby lists the table with the bot seated (snapshot or delta).
    const row = `#lobby tr[data-table="${table}"]`;
    await page.waitForSelector(`${row}[data-players="1"]`, { timeout: 20_000 });
    const rowText = await page.textContent(row);
    assert.match(rowText, /holdem\/2-seat\/super-express/);
    assert.match(rowText, /1\/2/);
    assert.match(rowText, /5\/10/, "the stakes");

    // Sit: the page gets a seat and, once the hand is dealt, two hole cards.
    await page.click(`${row} button.sit`);
    await page.waitForSelector(`#table-panel[data-seat]`, { timeout: 20_000 });
    const seat = Number(await page.getAttribute("#table-panel", "data-seat"));
    assert.notEqual(seat, bot.seat);
    await page.waitForFunction(() => document.getElementById("my-cards").dataset.cards.split(" ").length === 2, null, { timeout: 20_000 });
    const cards = (await page.getAttribute("#my-cards", "data-cards")).split(" ");
    assert.equal(cards.length, 2);
    for (const c of cards) assert.match(c, CARD);
    assert.equal(await page.locator("#my-cards .card").count(), 2);
    const hand = Number(await page.getAttribute("#table-panel", "data-hand"));
    assert.ok(hand >= 1, `hand number ${hand}`);
    // The bot got its own two cards, privately: never the page's.
    const botCards = bot.heard("cards").find((e) => e.hand === hand)?.cards ?? [];
    assert.equal(botCards.length, 2);
    for (const c of botCards) assert.ok(!cards.includes(c), `${c} dealt twice`);

    // Play by clicking until the hand's result: one raise, then check/call.
    let clicks = 0;
    let raised = false;
    let sawClock = false;
    const done = () => page.evaluate(() => Number(document.getElementById("results").dataset.count) >= 1);
    for (;;) {
      await page.waitForFunction(
        () => document.getElementById("actions").dataset.mine === "true" || Number(document.getElementById("results").dataset.count) >= 1,
        null,
        { timeout: 20_000 },
      );
      if (await done()) break;
      assert.equal(await page.textContent("#turn"), "Your turn");
      if (/\d+\.\d s left/.test(await page.textContent("#countdown"))) sawClock = true;
      if (!raised && (await page.isEnabled("#act-raise"))) {
        const min = Number(await page.getAttribute("#raise-to", "min"));
        const max = Number(await page.getAttribute("#raise-to", "max"));
        assert.ok(min > 0 && max >= min, `raise range ${min}..${max}`);
        await page.screenshot({ path: join(ARTIFACTS, `${shot}-turn.png`), fullPage: true });
        await page.fill("#raise-to", String(min));
        await page.click("#act-raise");
        raised = true;
      } else {
        await page.click("#act-call");
      }
      clicks++;
      assert.ok(clicks < 20, "the hand should end within 20 actions");
      // Wait until the game answered the click: the buttons turn off.
      await page.waitForFunction(() => document.getElementById("actions").dataset.mine !== "true", null, { timeout: 20_000 });
    }
    assert.ok(raised, "the page raised once");
    assert.ok(sawClock, "a countdown was shown on our turn");
    assert.ok(clicks >= 4, `one action per street at least, got ${clicks}`);
    assert.equal(await page.textContent("#act-error"), "");
    assert.deepEqual(bot.errors, []);

    // Nobody folded: a showdown, shown on the page with both hands.
    const result = bot.heard("result").find((e) => e.hand === hand);
    assert.ok(result, "the bot heard the result too");
    assert.equal(result.board.length, 5);
    assert.equal(result.shown.length, 2);
    const li = page.locator(`#results li[data-hand="${hand}"]`);
    const text = await li.textContent();
    assert.match(text, new RegExp(`^Hand #${hand}: `));
    assert.match(text, /(wins|split)/);
    assert.match(text, /seat \d \(you\) shows/);
    assert.equal(await li.locator(".card").count(), 4, "both players' hole cards shown");
    const shownMine = result.shown.find((s) => s.seat === seat);
    assert.deepEqual(shownMine?.cards, cards, "the cards shown at showdown are the page's hole cards");
    // The page shows the stacks of the result, and no chip was lost.
    await page.waitForFunction(() => document.getElementById("table-panel").dataset.street === "showdown", null, { timeout: 5_000 });
    const stacks = await page.$$eval("#seats tbody tr td:nth-child(3)", (tds) => tds.map((td) => Number(td.textContent)));
    const after = [...result.stacks].sort((a, b) => a.seat - b.seat).map((s) => s.stack);
    assert.deepEqual(stacks, after);
    const before = bot.heard("hand").find((e) => e.hand === hand).seats.reduce((n, s) => n + s.stack, 0);
    assert.equal(after[0] + after[1], before, `chips conserved: ${after} from ${before}`);

    // Chat on table:{id}, both ways.
    assert.equal(await page.textContent("#chat-channel"), `channel table:${table}`);
    const hello = `nice hand ${Math.random().toString(36).slice(2)}`;
    await page.fill("#chat-input", hello);
    await page.click("#chat-send");
    await waitFor(() => bot.chat.some((m) => m.text === hello), "the page's chat message at the bot");
    const reply = `thanks, again over ${expectedTransport}?`;
    await bot.say(reply);
    await page.waitForFunction((t) => document.getElementById("messages").textContent.includes(`bot: ${t}`), reply, { timeout: 20_000 });
    assert.match(await page.textContent("#messages"), new RegExp(hello));
    await page.screenshot({ path: join(ARTIFACTS, `${shot}.png`), fullPage: true });

    // Stand up: the bot sees the seat freed, the lobby shows one player again.
    const left = bot.seatPushes.length;
    await page.click("#stand");
    await page.waitForSelector("#table-panel:not([data-table])", { timeout: 20_000 });
    await waitFor(() => bot.seatPushes.slice(left).some((s) => s.seat === seat && s.status === "left"), "the bot seeing the page's seat left");
    await page.waitForSelector(`${row}[data-players="1"]`, { timeout: 20_000 });
    assert.deepEqual(errors, []);
  } finally {
    await page.close();
  }
}

test("a person picks a table in the lobby, sits, plays a hand against a bot to the end, chats, and stands up", async () => {
  const { tables } = await bot.client.lobby();
  assert.equal(tables.length, 1, "one table configured");
  table = tables[0].table;
  await bot.sit(table);
  await playAHand("/table.html", "websocket", "poker-table");
});

test("the same over long-polling", async () => {
  assert.ok(table, "the first test seated the bot");
  await playAHand("/table.html?transport=longpoll", "longpoll", "poker-table-longpoll");
});
