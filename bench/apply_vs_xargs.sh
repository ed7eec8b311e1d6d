#!/usr/bin/env bash
# Wall time of `wdc apply` running N trivial tasks (`true`) on 2 local
# workers, against `xargs -P 2` running the same N commands, in one run of
# this script; prints both times and their ratio.
#
#   bench/apply_vs_xargs.sh [N]      (default N=1000)
set -euo pipefail
n=${1:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$root" && CGO_ENABLED=0 go build -o "$work/wdc" ./cmd/wdc)
mkdir -p "$work/cfg"
cat > "$work/cfg/main.wdc.hcl" <<HCL
pool "p" {
  provider = "local"
  max      = 2
}

task "t" {
  count   = $n
  command = ["true"]
}
HCL

now() { date +%s.%N; }

t0=$(now)
seq "$n" | xargs -P 2 -I{} true
t1=$(now)
"$work/wdc" --chdir "$work/cfg" apply --auto-approve > "$work/apply.log"
t2=$(now)
grep '^Apply complete' "$work/apply.log"

awk -v n="$n" -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN {
  x = t1 - t0; w = t2 - t1
  printf "tasks: %d\nxargs -P 2: %.3f s\nwdc apply:  %.3f s\nratio wdc/xargs: %.1fx\nwdc per task: %.2f ms\n", n, x, w, w / x, 1000 * w / n
}'
