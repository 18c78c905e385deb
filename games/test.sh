#!/usr/bin/env bash
# Tests the example game modules in one command, on a fresh machine too:
# installs the TypeScript SDK (its npm ci builds dist/ with the game types
# and the harness) and this package, type-checks and bundles games/src/ to
# games/dist/, checks that the committed dist/ matches its sources, then runs
# the games' tests (node:test, on the SDK's harness; no server, no network
# beyond the npm registry). Node >= 20 with npm is expected (scripts/test.sh
# and sdk/typescript/test.sh install it).
#
# Usage: games/test.sh   (from anywhere)
set -euo pipefail
GAMES="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$GAMES/.." && pwd)"

command -v node >/dev/null && command -v npm >/dev/null \
    || { echo "games/test.sh needs Node.js >= 20 with npm" >&2; exit 1; }
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
    || { echo "Node.js >= 20 is needed (found $(node --version))" >&2; exit 1; }
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

echo "-- SDK: install and build (herald-client/game, herald-client/game-harness)"
(cd "$REPO/sdk/typescript" && npm ci --loglevel=error)

echo "-- games: install, type-check and bundle; the committed games/dist/ must match"
(cd "$GAMES" && npm ci --loglevel=error && npm run --silent build)
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$REPO" diff --exit-code --stat -- games/dist \
        || { echo "games/dist/ is stale: run 'npm run build' in games/ and commit it" >&2; exit 1; }
    untracked="$(git -C "$REPO" ls-files --others --exclude-standard -- games/dist)"
    [ -z "$untracked" ] || { echo "games/dist/ has files git does not track: $untracked" >&2; exit 1; }
fi

echo "-- games: rules, bots, hidden information, timers, save/restore"
(cd "$GAMES" && npm test --silent)
