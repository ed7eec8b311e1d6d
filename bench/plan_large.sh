#!/usr/bin/env bash
# Wall time and peak RSS of `wdc validate` on one task block with
# count = 10000, and of `wdc plan` on 10,000 task blocks placed on 100
# pools (empty state), 3 runs each, beside `wdc version` as the reference
# of a command that loads nothing.
#
#   bench/plan_large.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/wdc" ./cmd/wdc)

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

measure() { # NAME CMD...
	local name=$1
	shift
	for run in 1 2 3; do
		/usr/bin/time -f "$name run $run: %e s, peak RSS %M KB" "$@" > /dev/null
	done
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
measure "wdc version (reference)" "$work/wdc" version
measure "validate count=10000" "$work/wdc" --chdir "$work/count" validate
measure "plan 10000 blocks, 100 pools" "$work/wdc" --chdir "$work/blocks" plan
