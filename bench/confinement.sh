#!/usr/bin/env bash
# What confining attempts costs: `wdc apply` of N trivial tasks (`true`) on
# 2 local workers with the default (confined) and with confine = false,
# alternately, ROUNDS times, in one run of this script; prints each time
# and the difference per task.
#
#   bench/confinement.sh [N] [ROUNDS]      (defaults 1000 and 3)
set -euo pipefail
n=${1:-1000}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$root" && CGO_ENABLED=0 go build -o "$work/wdc" ./cmd/wdc)
config() { # config DIR CONFINE
	mkdir -p "$1"
	cat > "$1/main.wdc.hcl" <<HCL
pool "p" {
  provider = "local"
  max      = 2
  confine  = $2
}

task "t" {
  count   = $n
  command = ["true"]
}
HCL
}
now() { date +%s.%N; }
timed() { # timed DIR: seconds of a fresh apply there
	rm -rf "$1/.wdc"
	local t0 t1
	t0=$(now)
	"$work/wdc" --chdir "$1" apply --auto-approve > "$1/apply.log" 2>&1
	t1=$(now)
	grep -q '^Apply complete' "$1/apply.log"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
config "$work/on" true
config "$work/off" false
grep -q 'attempts are confined' "$work/on/apply.log" 2>/dev/null || true
for r in $(seq "$rounds"); do
	on=$(timed "$work/on")
	off=$(timed "$work/off")
	awk -v r="$r" -v on="$on" -v off="$off" -v n="$n" 'BEGIN {
	  printf "round %d: confined %.3f s, confine = false %.3f s, difference %+.3f ms per task\n", r, on, off, 1000 * (on - off) / n
	}'
done
# the workers' logs say whether they confined
grep -h 'attempts are' "$work/on/.wdc/workers"/*/*.log | head -n 1 || echo "note: the workers did not confine (see their logs)"
