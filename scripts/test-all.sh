#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace (unit, property, conformance, end-to-end,
# memory) and the interop suites that drive memkitd with real clients and compare it with
# real memcached. First installs what the tests need and the machine lacks
# (scripts/install-test-deps.sh), and checks that no crate's modules import each other in a
# loop of more than two files (scripts/module-loops.py).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh
# Everything the tests need is installed now: a missing peer fails its test, never skips it.
export MEMKIT_REQUIRE_INTEROP="${MEMKIT_REQUIRE_INTEROP:-1}"
echo "== module loops"
python3 scripts/module-loops.py --self-test
python3 scripts/module-loops.py

# Debug builds keep every temporary of an async state machine in its own stack slot; the
# default 2 MiB of a test thread has been seen to overflow under heavy machine load.
export RUST_MIN_STACK="${RUST_MIN_STACK:-8388608}"

echo "== cargo test (workspace)"
cargo build --workspace --bins
cargo test --workspace

export MEMKITD="${MEMKITD:-${CARGO_TARGET_DIR:-$PWD/target}/debug/memkitd}"
for suite in tests/*/run.sh; do
  [ -f "$suite" ] || continue
  echo "== $suite"
  bash "$suite"
done
echo "== all tests passed"
