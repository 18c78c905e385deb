#!/usr/bin/env bash
# Runs every test Herald has. Installs what it needs on a fresh machine first.
# Usage: ./scripts/test.sh        (CI runs exactly this, via .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== toolchain"
cargo --version
cargo fmt --version >/dev/null 2>&1 || { echo "rustfmt missing: rustup component add rustfmt"; exit 1; }
cargo clippy --version >/dev/null 2>&1 || { echo "clippy missing: rustup component add clippy"; exit 1; }

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== Rust unit and integration tests (real servers on 127.0.0.1, port 0);"
echo "   criterion benches run once each in test mode (no timing is asserted)"
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked

echo "== Python SDK (sdk/python): a virtualenv, pip install of the package, ruff, mypy --strict,"
echo "   pytest against the real server binary (target/debug/herald)"
# cargo test builds the binary only as a test harness: build (or refresh) the
# real one the SDK tests start.
cargo build -p herald --locked
HERALD_BIN="${HERALD_BIN:-$PWD/target/debug/herald}" sdk/python/test.sh

echo "== TypeScript SDK and demo page: vectors, real servers on every transport,"
echo "   reconnect/recovery, fallback; end-to-end in headless Chromium with a Python peer"
./sdk/typescript/test.sh
