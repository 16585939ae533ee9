#!/usr/bin/env bash
# make bench and make instructions for two bootstraps in one run, taking
# turns (A, B, A, B) so that a drift of the machine falls on both: the
# figures for a before/after decision (docs/benchmarks.md).
#   tools/bench-side-by-side.sh BEFORE_BOOTSTRAP AFTER_BOOTSTRAP [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1") after=$(realpath "$2") rounds=${3:-2}
cargo build --release --locked -p refund-chat-bench
out=target/side-by-side
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for side in before after; do
    bootstrap=$before; [ "$side" = after ] && bootstrap=$after
    echo "== make bench, $side, round $round" >&2
    target/release/refund-chat-bench "$bootstrap" > "$out/bench-$side-$round.txt"
  done
done
for side in before after; do
  bootstrap=$before; [ "$side" = after ] && bootstrap=$after
  echo "== make instructions, $side" >&2
  tools/instructions-per-turn.sh "$bootstrap" > "$out/instructions-$side.txt"
done
for f in "$out"/bench-*.txt "$out"/instructions-*.txt; do
  echo "### $(basename "$f" .txt)"
  cat "$f"
  echo
done
