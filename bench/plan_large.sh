#!/usr/bin/env bash
# Wall time and peak RSS of `wdc validate` on one task block with
# count = 10000, and of `wdc plan` on 10,000 task blocks placed on 100
# pools (empty state), RUNS runs each (default 3), beside `wdc version` as
# the reference of a command that loads nothing. With a git revision, the
# wdc built from that revision runs too, run for run beside this tree's, so
# both see the same load; the medians and their ratio close the output.
#
#   bench/plan_large.sh            # this tree's wdc
#   bench/plan_large.sh REV        # and REV's (e.g. a commit before a change)
set -euo pipefail
rev=${1:-}
runs=${RUNS:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/wdc" ./cmd/wdc)
bins=(wdc)
if [ -n "$rev" ]; then
	mkdir "$work/src"
	git -C "$root" archive "$rev" | tar -x -C "$work/src"
	(cd "$work/src" && CGO_ENABLED=0 go build -o "$work/wdc-$rev" ./cmd/wdc)
	bins=("wdc-$rev" wdc)
fi

mkdir -p "$work/count" "$work/blocks"
cat > "$work/count/main.wdc.hcl" <<'HCL'
pool "p" {
  provider = "local"
  max      = 2
}

task "t" {
  count   = 10000
  command = ["true", "${count.index}"]
}
HCL
{
	for i in $(seq 0 99); do
		printf 'pool "p%d" {\n  provider = "local"\n  max      = 2\n  labels   = { slot = "%d" }\n}\n\n' "$i" "$i"
	done
	for i in $(seq 0 9999); do
		printf 'task "t%d" {\n  command   = ["true", "%d"]\n  placement = { slot = "%d" }\n}\n\n' "$i" "$i" $((i % 100))
	done
} > "$work/blocks/main.wdc.hcl"

measure() { # NAME ARGS...: every binary RUNS times, alternating
	local name=$1
	shift
	for run in $(seq "$runs"); do
		for bin in "${bins[@]}"; do
			/usr/bin/time -f "$name|$bin|$run|%e|%M" -a -o "$work/times" "$work/$bin" "$@" > /dev/null
			tail -n 1 "$work/times" | awk -F'|' '{ printf "%s, %s, run %s: %s s, peak RSS %s KB\n", $1, $2, $3, $4, $5 }'
		done
	done
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
measure "wdc version (reference)" version
measure "validate count=10000" --chdir "$work/count" validate
measure "plan 10000 blocks, 100 pools" --chdir "$work/blocks" plan
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# The medians of the wall times and of the peak RSS per command and
# binary, with the ratio of each binary's median time to the first one's.
awk -F'|' -v first="${bins[0]}" '
	{ key = $1 SUBSEP $2; k = ++n[key]; t[key, k] = $4; r[key, k] = $5
	  if (!($1 in seen)) { seen[$1] = 1; cmd[++cmds] = $1 }
	  if (!($2 in bseen)) { bseen[$2] = 1; bin[++bins] = $2 } }
	function median(a, key, m,    i, j, v, x) {
		for (i = 1; i <= m; i++) v[i] = a[key, i] + 0
		for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j] < v[j-1]; j--) { x = v[j]; v[j] = v[j-1]; v[j-1] = x }
		return m % 2 ? v[(m+1)/2] : (v[m/2] + v[m/2+1]) / 2
	}
	END {
		for (c = 1; c <= cmds; c++) for (b = 1; b <= bins; b++) {
			key = cmd[c] SUBSEP bin[b]; m = median(t, key, n[key])
			line = sprintf("median of %d: %s, %s: %.2f s, peak RSS %d KB", n[key], cmd[c], bin[b], m, median(r, key, n[key]))
			if (b == 1) base = m; else if (base > 0) line = line sprintf(" (%.2f of %s)", m / base, first)
			print line
		}
	}' "$work/times"
