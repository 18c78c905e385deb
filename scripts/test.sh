#!/usr/bin/env bash
# Runs every test Herald has. Installs what it needs on a fresh machine first.
# Usage: ./scripts/test.sh        (CI runs exactly this, via .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== toolchain"
cargo --version
cargo fmt --version >/dev/null 2>&1 || { echo "rustfmt missing: rustup component add rustfmt"; exit 1; }
cargo clippy --version >/dev/null 2>&1 || { echo "clippy missing: rustup component add clippy"; exit 1; }

echo "== components the tests need"
# promtool (Debian's `prometheus` package) validates GET /metrics in
# crates/server/tests/metrics.rs; under CI that test fails without it.
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing promtool (apt package prometheus)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "promtool missing (apt-get install prometheus): the metrics test will skip its check"
  fi
fi

# redis-server (Debian's package) for the cluster tests (crates/server/tests/
# cluster.rs, crates/bench/tests/cluster.rs): each test starts its own on a
# free port. The Sentinel tests (crates/redis/tests/sentinel.rs,
# crates/server/tests/cluster_sentinel.rs) run `redis-server --sentinel`
# from the same package. The Redis Cluster tests (crates/redis/tests/cluster.rs,
# crates/server/tests/cluster_rediscluster.rs) start `redis-server
# --cluster-enabled yes` and join them with `redis-cli --cluster create`:
# redis-cli is in Debian's redis-tools, which redis-server depends on, so the
# one install below brings both. Under CI a missing redis-server fails those
# tests instead of skipping them.
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server (apt package redis-server)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  else
    echo "redis-server missing (apt-get install redis-server): the cluster tests will skip"
  fi
fi

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# README.md, crates/*/README.md, docs/ARCHITECTURE.md and docs/decisions/ cite
# no file that is gone.
scripts/check-doc-paths
# No import circle among a crate's files (crates/server: none at all; other
# crates: none beyond the old ones listed in scripts/module-cycles.known).
python3 scripts/module-cycles.py --workspace

echo "== Rust unit and integration tests (real servers on 127.0.0.1, port 0);"
echo "   criterion benches run once each in test mode (no timing is asserted)"
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked

echo "== Python SDK (sdk/python): a virtualenv, pip install of the package, ruff, mypy --strict,"
echo "   pytest against the real server binary (debug/herald in cargo's target directory)"
# cargo test builds the binary only as a test harness: build (or refresh) the
# real one the SDK tests start. Cargo says where it built it ($CARGO_TARGET_DIR
# or a .cargo/config.toml may move it out of the checkout): scripts/target-dir
# asks it, here and in every script and test that starts the binary.
cargo build -p herald --locked
BIN="${HERALD_BIN:-$(scripts/target-dir)/debug/herald}"
HERALD_BIN="$BIN" sdk/python/test.sh

echo "== TypeScript SDK and demo page: vectors, real servers on every transport,"
echo "   reconnect/recovery, fallback; end-to-end in headless Chromium with a Python peer"
./sdk/typescript/test.sh

echo "== game modules (games/): bundled from TypeScript, dist/ fresh, rules, bots, hidden"
echo "   information, timers and save/restore on the SDK's game harness"
games/test.sh

echo "== outside yardsticks: the field's own tools against the real binary"
echo "   (Autobahn|Testsuite, h2load, curl, eventsource, slow and malformed HTTP)"
HERALD_BIN="$BIN" tests/outside/run.sh

echo "== fuzzing: every cargo-fuzz target in fuzz/ for a few seconds"
# The targets' bodies also run on stable over the seed corpus in
# crates/proto/tests/fuzz_corpus.rs (above); this runs the real libFuzzer
# build briefly. README "Fuzzing" says how to run them for hours.
# HERALD_FUZZ_SECONDS=0 skips this section.
FUZZ_SECONDS="${HERALD_FUZZ_SECONDS:-5}"
if [ "$FUZZ_SECONDS" != 0 ]; then
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  cargo +nightly fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked
  (
    cd fuzz
    cargo +nightly fuzz build
    for target in $(cargo +nightly fuzz list); do
      scratch="$(mktemp -d)"
      # New inputs go to the scratch directory; the committed seeds stay as they are.
      mkdir "$scratch/new"
      if ! cargo +nightly fuzz run "$target" "$scratch/new" "corpus/$target" -- \
          -max_total_time="$FUZZ_SECONDS" >"$scratch/log" 2>&1; then
        tail -40 "$scratch/log"
        echo "fuzz target $target FAILED; the crashing input is in fuzz/artifacts/$target/"
        exit 1
      fi
      echo "$target: $(grep -E '^Done' "$scratch/log")"
      rm -rf "$scratch"
    done
  )
fi
