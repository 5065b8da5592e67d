#!/usr/bin/env bash
# Issue 16 item 9's sitting: an old commit and a new one, side by side on one quiet machine,
# alternating, three times each: bench/ack_latency.py first, then bench/experiment_overhead.py.
# Each checkout runs its own copy of the scripts with its own venv (`make venv` in each first).
# Prints nothing itself: every run's output goes to OUT/{ack,ovh}-{old,new}-N.txt, and OUT/log
# says when each started and at what load. Needs root (the testbeds). Not a test.
#
#   OLD=/path/to/old-checkout NEW=/path/to/new-checkout OUT=/tmp/side bench/side_by_side.sh
set -u
OLD=${OLD:?the old commit's checkout}
NEW=${NEW:?the new commit's checkout}
OUT=${OUT:-/tmp/flagbot-side-by-side}
RUNS=${RUNS:-3}
mkdir -p "$OUT"
sitting() {  # $1: ack | ovh, then the script and its arguments
  local kind=$1
  shift
  for i in $(seq 1 "$RUNS"); do
    for side in old new; do
      local dir=$OLD
      [ "$side" = new ] && dir=$NEW
      echo "== $side $i $kind $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) ($(git -C "$dir" rev-parse --short HEAD))" >>"$OUT/log"
      (cd "$dir" && .venv/bin/python "$@") >"$OUT/$kind-$side-$i.txt" 2>&1
      echo "rc $?" >>"$OUT/log"
    done
  done
}
sitting ack bench/ack_latency.py --instance 216
sitting ovh bench/experiment_overhead.py --instance 203 --long-running 3
echo "== end $(date +%T)" >>"$OUT/log"
