#!/usr/bin/env bash
# What N trivial tasks (`true`: no output, no outputs) leave in the work
# folder after one `wdc apply` on 2 local workers: the entries (files and
# folders) under it, per task, by folder, and its bytes (apparent and on
# disk), with the apply's wall time. An apply of one task is measured
# first in the same run, so the entries every work folder has (the state,
# its side files, the empty blob, the folders, the worker logs) are told
# apart from those each further task leaves: entries per task is
# (entries after N - entries after 1) / (N - 1).
#
#   bench/work_folder_files.sh [N]      (default N=1000)
#
# WDC=/path/to/wdc measures that binary instead of one built from this
# checkout (to compare two builds, run the script with each, alternately).
set -euo pipefail
n=${1:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

wdc=${WDC:-}
if [ -z "$wdc" ]; then
	wdc=$work/wdc
	(cd "$root" && CGO_ENABLED=0 go build -o "$wdc" ./cmd/wdc)
fi

now() { date +%s.%N; }

# apply COUNT: applies COUNT `true` tasks in a configuration of its own,
# prints its wall time, and leaves the work folder at $work/cfg-COUNT/.wdc.
apply() {
	local cfg=$work/cfg-$1
	mkdir -p "$cfg"
	cat > "$cfg/main.wdc.hcl" <<HCL
pool "p" {
  provider = "local"
  max      = 2
}

task "t" {
  count   = $1
  command = ["true"]
}
HCL
	local t0 t1
	t0=$(now)
	"$wdc" --chdir "$cfg" apply --auto-approve > "$work/apply-$1.log"
	t1=$(now)
	grep -q '^Apply complete' "$work/apply-$1.log"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

# entries DIR: the number of files and folders below DIR (DIR not counted).
entries() { find "$1" -mindepth 1 | wc -l; }

[ "$n" -ge 2 ] || { echo "N must be 2 or more" >&2; exit 2; }
apply 1 > /dev/null
wall=$(apply "$n")
base=$work/cfg-1/.wdc
dir=$work/cfg-$n/.wdc

total=$(entries "$dir")
fixed=$(entries "$base")
echo "tasks: $n"
echo "apply wall time: $wall s"
echo "entries in the work folder: $total (an apply of one task leaves $fixed)"
awk -v t="$total" -v f="$fixed" -v n="$n" 'BEGIN { printf "entries per task: %.3f\n", (t - f) / (n - 1) }'
echo "bytes (apparent): $(du -sb "$dir" | cut -f1)"
echo "bytes (on disk): $(( $(du -sk "$dir" | cut -f1) * 1024 ))"
echo "by folder (entries below it):"
for d in "$dir"/*/; do
	d=${d%/}
	printf '  %-10s %s\n' "$(basename "$d")" "$(entries "$d")"
done
