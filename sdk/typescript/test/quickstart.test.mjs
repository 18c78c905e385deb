// The README's install and quick start, done as a user does them: a new
// project in a temporary folder outside the SDK, `npm install` of an SDK
// folder as a fresh checkout has it (no node_modules/, no dist/: the
// package's `prepare` script must fetch its build tools and build dist/), then
// the README's quick-start code, byte for byte but for the server's URL, run
// with node against a real server; it must print the publication it sent.
// Packages come from the configured npm registry (or npm's cache).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Server } from "./helpers.mjs";

const SDK = fileURLToPath(new URL("../", import.meta.url));
const README = readFileSync(join(SDK, "README.md"), "utf8");

/** The lines of the README section `## title`. */
function section(title) {
  const start = README.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `README has no "## ${title}"`);
  const end = README.indexOf("\n## ", start + 1);
  return README.slice(start, end < 0 ? undefined : end);
}

const server = new Server();
let dir;
before(async () => {
  await server.start();
  dir = mkdtempSync(join(tmpdir(), "herald-ts-quickstart-"));
});
after(async () => {
  await server.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("README: npm install of the SDK folder, then the quick start receives its message", { timeout: 300_000 }, async () => {
  // The install line names the SDK folder of a checkout; npm must build it.
  const install = section("Install").match(/^ {4}(npm install \S*sdk\/typescript)\b/m);
  assert.ok(install, "README's Install section has no `npm install …sdk/typescript` line");

  // A fresh checkout's SDK folder: what git tracks, without build output.
  const checkout = join(dir, "herald", "sdk", "typescript");
  cpSync(SDK, checkout, {
    recursive: true,
    filter: (src) => !["node_modules", "dist", "artifacts"].includes(basename(src)),
  });

  // The user's project, outside the SDK.
  const app = join(dir, "app");
  const npm = (...args) =>
    execFileSync("npm", args, { cwd: app, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  mkdirSync(app);
  npm("init", "-y");
  npm("install", "--no-audit", "--no-fund", "--loglevel=error", checkout);
  const pkg = JSON.parse(readFileSync(join(app, "package.json"), "utf8"));
  assert.ok(pkg.dependencies?.["herald-client"], `herald-client not in the project's dependencies: ${JSON.stringify(pkg)}`);

  // The quick start, its URL pointed at the test server.
  const code = section("Quick start").match(/```ts\n([\s\S]*?)```/);
  assert.ok(code, "README's Quick start has no ```ts block");
  const url = code[1].match(/"(ws:\/\/localhost:8080\/ws)"/);
  assert.ok(url, "the quick start connects to ws://localhost:8080/ws");
  writeFileSync(join(app, "quickstart.mjs"), code[1].replace(url[1], server.wsUrl));

  // It never closes its client, so it runs until killed: wait for its line.
  const proc = spawn(process.execPath, ["quickstart.mjs"], { cwd: app, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (out += d));
  const exited = new Promise((r) => proc.once("exit", r));
  const deadline = Date.now() + 15_000;
  while (!/^1 \{ text: 'hello' \}$/m.test(out) && proc.exitCode === null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill();
  await exited;
  assert.match(out, /^1 \{ text: 'hello' \}$/m, `the quick start printed:\n${out}`);
});
