// Bundles the demo's script into web/dist/demo.js (committed: `herald serve`
// embeds it, so building the server needs no Node; index.html and demo.css
// need no build and are embedded straight from web/src/). Deterministic: the
// same sources give the same bytes, which the test command checks.
import { build } from "esbuild";
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
mkdirSync(`${here}dist`, { recursive: true });
await build({
  entryPoints: [`${here}src/demo.ts`],
  outfile: `${here}dist/demo.js`,
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
