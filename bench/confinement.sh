#!/usr/bin/env bash
# What confining attempts costs: `wdc apply` of N trivial tasks (`true`) on
# 2 local workers with the default (confined: as root, by a mount
# namespace), with confine = false and, when setpriv can drop
# CAP_SYS_ADMIN, confined by Landlock rules alone (the state beside the
# configuration directory, as that needs), alternately, ROUNDS times, in
# one run of this script; prints each time and the differences per task.
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
timed() { # timed DIR [PREFIX...]: seconds of a fresh apply there
	local dir=$1 t0 t1
	shift
	rm -rf "$dir/.wdc" "$dir-state"
	t0=$(now)
	"$@" "$work/wdc" --chdir "$dir" --state "$dir-state/state.db" apply --auto-approve > "$dir/apply.log" 2>&1
	t1=$(now)
	grep -q '^Apply complete' "$dir/apply.log"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
config "$work/on" true
config "$work/off" false
config "$work/landlock" true
landlock=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	landlock=(setpriv --bounding-set=-sys_admin --)
fi
for r in $(seq "$rounds"); do
	on=$(timed "$work/on" env)
	off=$(timed "$work/off" env)
	ll=0
	if [ ${#landlock[@]} -gt 0 ]; then
		ll=$(timed "$work/landlock" "${landlock[@]}")
	fi
	awk -v r="$r" -v on="$on" -v off="$off" -v ll="$ll" -v n="$n" 'BEGIN {
	  printf "round %d: confined %.3f s (%+.3f ms per task), confine = false %.3f s", r, on, 1000 * (on - off) / n, off
	  if (ll > 0) printf ", Landlock rules alone %.3f s (%+.3f ms per task)", ll, 1000 * (ll - off) / n
	  printf "\n"
	}'
done
# the workers' logs say how they confined
for arm in on landlock; do
	grep -h 'attempts are' "$work/$arm-state/workers"/*/*.log 2>/dev/null | head -n 1 || true
done
