#!/usr/bin/env bash
# The apply process's memory while N trivial tasks (`true`) run on W local
# workers: every S seconds, its resident set (VmRSS), of it the file-backed
# pages (RssFile: the binary's code and data, shared and clean) and the
# anonymous ones (RssAnon: heap, stacks, SQLite's pages), its peak so far
# (VmHWM), and how many results the workers saw accepted by then (their
# logs' "result accepted" lines). RSS that is flat in the number of
# finished tasks stays level down the accepted column once the plan is
# recorded; one that grows with it climbs.
#
#   bench/apply_rss.sh [N [W [S]]]     (defaults: 10000 tasks, 16 workers, 2 s)
#
# WDC=/path/to/wdc measures that binary instead of one built from this
# checkout. GODEBUG=gctrace=1 in the environment adds the Go heap's own
# trace (live heap after each collection) to apply.log, which the script
# prints the last lines of.
set -euo pipefail
n=${1:-10000}
w=${2:-16}
every=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

wdc=${WDC:-}
if [ -z "$wdc" ]; then
	wdc=$work/wdc
	(cd "$root" && GODEBUG= CGO_ENABLED=0 go build -o "$wdc" ./cmd/wdc)
fi

cfg=$work/cfg
mkdir -p "$cfg"
cat > "$cfg/main.wdc.hcl" <<HCL
pool "p" {
  provider = "local"
  max      = $w
}

task "t" {
  count   = $n
  command = ["true"]
}
HCL

kb() { awk -v k="$1" '$1 == k":" { print $2 }' "/proc/$2/status" 2>/dev/null; }

echo "tasks: $n, workers: $w, cores: $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$wdc" --chdir "$cfg" apply --auto-approve > "$work/apply.log" 2>&1 &
pid=$!
start=$(date +%s.%N)
printf '%7s %9s %9s %9s %9s %9s\n' t_s rss_MB file_MB anon_MB peak_MB accepted
while kill -0 "$pid" 2>/dev/null; do
	rss=$(kb VmRSS "$pid") file=$(kb RssFile "$pid") anon=$(kb RssAnon "$pid") hwm=$(kb VmHWM "$pid")
	[ -n "$rss" ] || break
	accepted=$(cat "$cfg"/.wdc/workers/*/*.log 2>/dev/null | grep -c 'msg="result accepted"' || true)
	awk -v a="$start" -v b="$(date +%s.%N)" -v r="$rss" -v f="$file" -v an="$anon" -v h="$hwm" -v c="$accepted" \
		'BEGIN { printf "%7.1f %9.1f %9.1f %9.1f %9.1f %9d\n", b - a, r / 1024, f / 1024, an / 1024, h / 1024, c }'
	sleep "$every"
done
wait "$pid" || { echo "the apply failed:" >&2; tail -5 "$work/apply.log" >&2; exit 1; }
grep '^Apply complete' "$work/apply.log"
if grep -q '^gc ' "$work/apply.log"; then
	echo "last collections (GODEBUG=gctrace=1):"
	grep '^gc ' "$work/apply.log" | tail -3
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
