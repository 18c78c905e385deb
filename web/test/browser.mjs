// Headless Chromium for the end-to-end tests: Debian's `chromium` ($CHROMIUM;
// never a downloaded browser) driven by playwright-core, in a profile of its
// own that `close()` removes. Screenshots go to ARTIFACTS.
import { mkdirSync, mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

/** Where screenshots go: $HERALD_ARTIFACTS, else web/artifacts/. */
export const ARTIFACTS = process.env.HERALD_ARTIFACTS ?? join(fileURLToPath(new URL("..", import.meta.url)), "artifacts");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

/** A browser context with a `width`×`height` window, and `close()`, which
 * closes it and removes its profile. */
export async function launchBrowser(width, height) {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
  mkdirSync(ARTIFACTS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "herald-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width, height },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
