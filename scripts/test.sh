#!/usr/bin/env bash
# Runs every test Herald has. Installs what it needs on a fresh machine first.
# Usage: ./scripts/test.sh        (CI runs exactly this, via .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== toolchain"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo --version

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== build once (release binary reused by the integration tests)"
cargo build --release --locked -p herald
export HERALD_BIN="$PWD/target/release/herald"

echo "== Rust unit and integration tests"
cargo test --workspace --locked
