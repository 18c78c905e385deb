// Bundles each games/src/*.ts into games/dist/<name>.js: one ES module per
// game with no imports left (docs/games.md: Herald's engine loads one file),
// the file a server's `[[games]] module = "games/dist/<name>.js"` names.
// Not minified, so that a fault's line number in Herald's log points at
// readable code. dist/ is committed (a server needs no Node to run the
// examples); `node build.mjs --check` builds in memory and fails if dist/
// differs, which `npm test` runs first.
import { build } from "esbuild";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const src = join(here, "src");
const dist = join(here, "dist");
const check = process.argv.includes("--check");

const result = await build({
  entryPoints: readdirSync(src).filter((f) => f.endsWith(".ts")).sort().map((f) => join(src, f)),
  outdir: dist,
  bundle: true,
  format: "esm",
  // QuickJS runs ES2020 and more; "neutral" assumes no browser or Node APIs.
  target: "es2020",
  platform: "neutral",
  minify: false,
  banner: { js: "// Built from games/src/ by games/build.mjs: edit the TypeScript source and run `npm run build` in games/." },
  legalComments: "none",
  logLevel: "warning",
  write: false,
});

const built = new Map(result.outputFiles.map((f) => [basename(f.path), f.text]));
const present = existsSync(dist) ? readdirSync(dist, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name) : [];

if (check) {
  const stale = [...built].filter(([name, text]) => !present.includes(name) || readFileSync(join(dist, name), "utf8") !== text).map(([name]) => name);
  const extra = present.filter((name) => !built.has(name));
  if (stale.length > 0 || extra.length > 0) {
    console.error(`games/dist/ does not match games/src/ (stale or missing: ${stale.join(", ") || "none"}; no source: ${extra.join(", ") || "none"}): run \`npm run build\` in games/ and commit dist/`);
    process.exit(1);
  }
} else {
  mkdirSync(dist, { recursive: true });
  for (const name of present) if (!built.has(name)) rmSync(join(dist, name));
  for (const [name, text] of built) writeFileSync(join(dist, name), text);
}
