#!/usr/bin/env bash
# Profiles the bootstrap under `make bench`'s load: builds it with symbols
# (profile `profiling`), runs it inside `perf record` (software clock; this
# machine has no hardware counters), and prints where the CPU time goes.
#   COLD=5 WARM=2000 tools/profile-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
cargo build --profile profiling --locked -p refund-chat
cargo build --release --locked -p refund-chat-bench

out=$PWD/target/profiling/perf
rm -rf "$out" && mkdir -p "$out"
cat > "$out/bootstrap" <<SH
#!/bin/sh
exec perf record -q -e cpu-clock -F 4999 --call-graph dwarf,32768 -o "$out/perf-\$\$.data" -- "$PWD/target/profiling/refund-chat"
SH
chmod +x "$out/bootstrap"
target/release/refund-chat-bench "$out/bootstrap" --cold "${COLD:-5}" --warm "${WARM:-2000}"

warm=$(ls -S "$out"/perf-*.data | head -n 1)   # the warm run is the longest
cold=$(ls -S "$out"/perf-*.data | tail -n 1)
echo; echo "== warm loop, self time by function: $warm"
perf report -i "$warm" --no-children --sort symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -n 40
echo; echo "== warm loop, inclusive time by crate-level frame"
perf report -i "$warm" --children --sort symbol --stdio -g none 2>/dev/null | grep -v '^#' | grep '%' | head -n 60
echo; echo "== one cold start, inclusive: $cold"
perf report -i "$cold" --children --sort symbol --stdio -g none 2>/dev/null | grep -v '^#' | grep '%' | head -n 40
