// npm's `prepare` step for this package: builds dist/ from src/ with the
// TypeScript compiler pinned in package-lock.json.
//
// npm runs `prepare` after `npm install`/`npm ci` in this folder, before
// `npm pack`, and also when another project installs this folder
// (`npm install ./sdk/typescript`, the README's install line). In that last
// case npm links the folder but installs none of its devDependencies, so on a
// fresh checkout there is no compiler yet and no dist/ (the package's entry
// point): fetch the build tools first, with `npm ci` here, then build.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, "node_modules", "typescript", "bin", "tsc");

if (!existsSync(tsc)) {
  // The outer npm's settings for *its* project must not steer this install:
  // its folder (local_prefix), --omit=dev or --global, --ignore-scripts...
  // Registry, proxy and cache settings stay.
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (/^npm_config_(local_prefix|prefix|global|omit|include|production|only|dev|dry_run|workspaces?|install_links|ignore_scripts|save.*|package_lock.*)$/i.test(key)) {
      delete env[key];
    }
  }
  const npm = process.env.npm_execpath;
  const [cmd, args] = npm ? [process.execPath, [npm]] : ["npm", []];
  console.error("herald-client: installing its build tools (npm ci) to build dist/");
  execFileSync(cmd, [...args, "ci", "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: here,
    env,
    stdio: ["ignore", "inherit", "inherit"],
  });
}
execFileSync(process.execPath, [tsc, "-p", join(here, "tsconfig.json")], { cwd: here, stdio: "inherit" });
