// Builds the demo page into web/dist/ (committed: `herald serve` embeds these
// files, so building the server needs no Node). Deterministic: the same
// sources give the same bytes, which the test command checks.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
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
copyFileSync(`${here}src/index.html`, `${here}dist/index.html`);
copyFileSync(`${here}src/demo.css`, `${here}dist/demo.css`);
