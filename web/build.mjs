// Bundles the pages' scripts into web/dist/ (committed: `herald serve`
// embeds them, so building the server needs no Node): demo.ts → demo.js for
// the demo at `/`, table.ts → table.js for the poker table at `/table.html`,
// games.ts (with its renderers/) → games.js for the game modules' page at
// `/games.html`, admin.ts → admin.js for the admin dashboard at `/admin`.
// The HTML and demo.css need no build and are embedded straight from
// web/src/. Each page is bundled on its own (no shared chunks), so each is
// one file. Deterministic: the same sources give the same bytes, which the
// test command checks.
import { build } from "esbuild";
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
mkdirSync(`${here}dist`, { recursive: true });
await build({
  entryPoints: [`${here}src/demo.ts`, `${here}src/table.ts`, `${here}src/games.ts`, `${here}src/admin.ts`],
  outdir: `${here}dist`,
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
