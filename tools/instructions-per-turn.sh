#!/usr/bin/env bash
# The steady companion of `make bench`: user-space instructions (valgrind's
# callgrind, which counts rather than samples) for one cold start and per
# warm turn of each loop. The same build gives the same counts on a busy
# VM, where `make bench`'s CPU times move by 10 to 20% from run to run, so
# a change's effect can be seen without repeating runs. The kernel's share
# (the loopback writes) is not counted. Under valgrind, SHA-256 runs in
# software (no SHA extensions), so signing weighs more here than natively.
#   tools/instructions-per-turn.sh [BOOTSTRAP]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
bootstrap=${1:-}
if [ -z "$bootstrap" ]; then
  cargo build --release --locked -p refund-chat
  bootstrap=$PWD/target/release/refund-chat
fi
cargo build --release --locked -p refund-chat-bench

out=$PWD/target/instructions
rm -rf "$out" && mkdir -p "$out"
# One warm turn and 41: the difference over 40 is a turn, start-up excluded.
for turns in 1 41; do
  cat > "$out/bootstrap-$turns" <<SH
#!/bin/sh
exec valgrind -q --tool=callgrind --callgrind-out-file="$out/$turns.%p" "$bootstrap"
SH
  chmod +x "$out/bootstrap-$turns"
  target/release/refund-chat-bench "$out/bootstrap-$turns" --cold 1 --warm "$turns" > "$out/bench-$turns.txt"
done

python3 - "$out" <<'PY'
import glob, re, sys
out = sys.argv[1]
def totals(turns):
    # One file per process, in start order: the cold start, then the loops.
    files = sorted(glob.glob(f"{out}/{turns}.*"), key=lambda f: int(f.rsplit(".", 1)[1]))
    return [int(re.search(r"summary: (\d+)", open(f).read()).group(1)) for f in files]
one, many = totals(1), totals(41)
print("| figure | instructions |")
print("| --- | ---: |")
print(f"| one cold start: start-up and its first turn | {one[0] / 1e6:.2f} M |")
for i, name in enumerate(["refund turn", "keyed refund turn", "keyed refund turn, 20 earlier exchanges"], 1):
    print(f"| {name}, per turn | {(many[i] - one[i]) / 40e6:.3f} M |")
PY
