#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace (unit, property, conformance, end-to-end,
# memory) and the interop suites that drive memkitd with real clients and compare it with
# real memcached. Expects what .ci/run installs (memcached, libmemcached-tools, Python deps);
# the interop runner installs what it finds missing when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

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
