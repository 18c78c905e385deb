// End-to-end: `play` on the poker page (/table.html) served by a real
// `herald serve` with no configured table (Hold'em is always there, and
// `play` with it), in headless Chromium (Debian's `chromium`, driven by
// playwright-core):
// - "New private table" in one page seats it at a new table and shows the
//   code and its share link; a second page joins by typing the code, a
//   third by opening the link; both are dealt cards at the same table;
// - a code nobody has shows the server's refusal (121) and seats nobody;
// - "Play now" seats a page at a public table made by `play`, whose lobby
//   row offers Watch but no Sit (such tables seat through `play` only);
// - after a dropped network the page's `sit` cannot take that anonymous
//   seat back (116): the page says so, clears the table, and plays again.
// Screenshots go to web/artifacts/ (or $HERALD_ARTIFACTS).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Proxy, Server } from "../../sdk/typescript/test/helpers.mjs";
import { ARTIFACTS, launchBrowser } from "./browser.mjs";

const CODE = /^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{6}$/;

const server = new Server();
let context;
let browser;

before(async () => {
  await server.start();
  browser = await launchBrowser(1400, 900);
  context = browser.context;
});

after(async () => {
  await browser?.close();
  await server.stop();
});

/** A new page at `path`, ready; page errors are collected in `page.errors`. */
async function open(path) {
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(e));
  await page.goto(`${server.url}${path}`);
  await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 });
  return page;
}

/** The table and seat the page shows itself at, once it is seated (or
 * the error it shows instead). */
async function seated(page) {
  await page.waitForFunction(
    () => document.getElementById("table-panel").dataset.seat !== undefined || document.getElementById("act-error").textContent !== "",
    null,
    { timeout: 20_000 },
  );
  assert.equal(await page.textContent("#act-error"), "");
  return {
    table: Number(await page.getAttribute("#table-panel", "data-table")),
    seat: Number(await page.getAttribute("#table-panel", "data-seat")),
  };
}

/** Waits until the page shows its two hole cards. */
function dealt(page) {
  return page.waitForFunction(() => document.getElementById("my-cards").dataset.cards?.split(" ").length === 2, null, { timeout: 30_000 });
}

test("a private table: created in one page, joined by its code in a second and by its link in a third", async () => {
  const pages = [];
  try {
    const owner = await open("/table.html");
    pages.push(owner);
    assert.equal(await owner.isVisible("#play-code"), false, "no code before a private table");
    await owner.click("#play-private");
    const mine = await seated(owner);
    await owner.waitForSelector("#play-code:not([hidden])", { timeout: 20_000 });
    const code = await owner.textContent("#code");
    assert.match(code, CODE);
    const link = await owner.getAttribute("#share-link", "href");
    assert.equal(link, `${server.url}/table.html?code=${code}`);
    assert.equal(await owner.textContent("#share-link"), link);

    // Typed in (lower case and spaced, as a person might).
    const friend = await open("/table.html");
    pages.push(friend);
    await friend.fill("#code-input", ` ${code.toLowerCase()} `);
    await friend.click("#code-join");
    const theirs = await seated(friend);
    assert.equal(theirs.table, mine.table);
    assert.notEqual(theirs.seat, mine.seat);
    assert.equal(await friend.textContent("#code"), code, "the friend sees the code too");

    // Two seated: a hand is dealt to both, through the table's pushes.
    await dealt(owner);
    await dealt(friend);

    // The share link joins as well.
    const third = await open(`/table.html?code=${code}`);
    pages.push(third);
    const also = await seated(third);
    assert.equal(also.table, mine.table);
    assert.ok(![mine.seat, theirs.seat].includes(also.seat));
    assert.equal(await third.inputValue("#code-input"), code);
    await owner.screenshot({ path: join(ARTIFACTS, "poker-private-table.png"), fullPage: true });

    // The lobby shows the private table without Sit or Watch buttons.
    const row = `#lobby tr[data-table="${mine.table}"]`;
    await owner.waitForSelector(`${row}[data-players="3"]`, { timeout: 20_000 });
    assert.equal(await owner.locator(`${row} button`).count(), 0);
    assert.match(await owner.textContent(`${row} td.lobby-actions`), /private/);

    // Standing up hides the code.
    await owner.click("#stand");
    await owner.waitForSelector("#table-panel:not([data-table])", { timeout: 20_000 });
    assert.equal(await owner.isVisible("#play-code"), false);
    for (const p of pages) assert.deepEqual(p.errors, []);
  } finally {
    for (const p of pages) await p.close();
  }
});

test("a code nobody has is refused with 121 and seats nobody", async () => {
  const page = await open("/table.html");
  try {
    await page.fill("#code-input", "0O1I00");
    await page.click("#code-join");
    await page.waitForFunction(() => document.getElementById("act-error").textContent !== "", null, { timeout: 20_000 });
    const error = await page.textContent("#act-error");
    assert.match(error, /^could not join table 0O1I00: 121 /);
    assert.equal(await page.getAttribute("#table-panel", "data-table"), null);
    assert.equal(await page.isEnabled("#code-join"), true, "the buttons are back");
    assert.deepEqual(page.errors, []);
  } finally {
    await page.close();
  }
});

test("Play now seats the page at a 6-seat table made by play, which the lobby offers to watch only", async () => {
  const page = await open("/table.html");
  try {
    await page.click("#play-now");
    const at = await seated(page);
    assert.equal(await page.isVisible("#play-code"), false, "a public table has no code");
    const row = `#lobby tr[data-table="${at.table}"]`;
    await page.waitForSelector(`${row}[data-players="1"]`, { timeout: 20_000 });
    assert.match(await page.textContent(row), /holdem\/6-seat\/\S+/);
    assert.match(await page.textContent(row), /1\/6/);
    assert.equal(await page.locator(`${row} button.sit`).count(), 0);
    assert.equal(await page.locator(`${row} button.watch`).count(), 1);
    assert.match(await page.textContent("#table-name"), new RegExp(`^${at.table} · holdem/6-seat/`));
    await page.screenshot({ path: join(ARTIFACTS, "poker-play-now.png"), fullPage: true });
    assert.deepEqual(page.errors, []);
  } finally {
    await page.close();
  }
});

test("a dropped network: the anonymous played seat is not taken back (116), the page clears it and plays again", async () => {
  const proxy = new Proxy(server.port);
  await proxy.start();
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(e));
  try {
    await page.goto(`http://127.0.0.1:${proxy.port}/table.html`);
    await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 20_000 });
    await page.click("#play-now");
    const first = await seated(page);
    proxy.drop();
    await page.waitForFunction(() => document.getElementById("act-error").textContent.startsWith("after reconnecting:"), null, { timeout: 20_000 });
    assert.match(await page.textContent("#act-error"), /^after reconnecting: 116 /);
    assert.equal(await page.getAttribute("#table-panel", "data-table"), null, "the stale table is cleared");
    assert.equal(await page.textContent("#reconnects"), "1");
    await page.click("#play-now");
    const again = await seated(page);
    assert.ok(again.table > 0);
    assert.ok(first.table > 0);
    assert.deepEqual(page.errors, []);
  } finally {
    await page.close();
    await proxy.stop();
  }
});
