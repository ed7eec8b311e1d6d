#!/usr/bin/env bash
# wdc apply against its peers on the same work: N trivial tasks (`true`) on
# W local workers, against `xargs -P W` and GNU parallel `-j W` running the
# same N commands, interleaved in R rounds of this one script. Each round
# applies on a fresh state. Prints every round, then the medians and the
# ratios the performance targets are written in (docs/PERFORMANCE.md), and
# what the apply leaves behind: peak RSS of the apply process, entries
# (files and folders) left in the work folder per task, and state bytes per
# finished task (state.db and its WAL, after the apply closed it).
#
#   bench/peers.sh [N [W [R]]]        (defaults: 1000 tasks, 2 workers, 3 rounds)
#
# The pool is `max = W`, `capacity = 1`; the supervisor starts it with the
# workers the queued tasks fill (all W here), as in any apply. GNU parallel is
# installed with apt-get where it is missing and this runs as root; without
# it that column says "-". The machine's load is printed before and after:
# the numbers are only worth their ratios on a quiet machine.
#
# WDC=/path/to/wdc measures that binary instead of one built from this
# checkout (to compare two builds, run the script with each, alternately).
set -euo pipefail
n=${1:-1000}
w=${2:-2}
rounds=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v parallel >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing GNU parallel (apt-get)..." >&2
		(apt-get update -qq && apt-get install -y -qq parallel) >/dev/null 2>&1 || true
	fi
fi
have_parallel=false
if command -v parallel >/dev/null && parallel --version 2>/dev/null | grep -q 'GNU parallel'; then
	have_parallel=true
fi
[ -x /usr/bin/time ] || { echo "bench/peers.sh needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }

wdc=${WDC:-}
if [ -z "$wdc" ]; then
	wdc=$work/wdc
	(cd "$root" && CGO_ENABLED=0 go build -o "$wdc" ./cmd/wdc)
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

echo "tasks: $n, workers: $w, rounds: $rounds, cores: $(nproc)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %10s %10s %10s %9s %12s %14s\n' round xargs parallel wdc rss_MB entries/task state_B/task
: > "$work/rows"
for r in $(seq "$rounds"); do
	t0=$(now)
	seq "$n" | xargs -P "$w" -I{} true
	t1=$(now)
	x=$(elapsed "$t0" "$t1")

	p=-
	if $have_parallel; then
		t0=$(now)
		seq "$n" | parallel --will-cite -j "$w" true
		t1=$(now)
		p=$(elapsed "$t0" "$t1")
	fi

	cfg="$work/cfg$r"
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
	t0=$(now)
	/usr/bin/time -f '%M' -o "$work/rss" "$wdc" --chdir "$cfg" apply --auto-approve > "$work/apply.log"
	t1=$(now)
	a=$(elapsed "$t0" "$t1")
	grep -q '^Apply complete! Tasks: '"$n"' succeeded' "$work/apply.log" || {
		echo "round $r: the apply did not finish every task:" >&2
		tail -5 "$work/apply.log" >&2
		exit 1
	}
	rss=$(awk '{ printf "%.0f", $1 / 1024 }' "$work/rss")
	entries=$(find "$cfg/.wdc" -mindepth 1 | wc -l)
	bytes=0
	for f in "$cfg/.wdc/state.db" "$cfg/.wdc/state.db-wal"; do
		[ -f "$f" ] && bytes=$((bytes + $(stat -c %s "$f")))
	done
	ept=$(awk -v e="$entries" -v n="$n" 'BEGIN { printf "%.2f", e / n }')
	bpt=$(awk -v b="$bytes" -v n="$n" 'BEGIN { printf "%.0f", b / n }')
	printf '%-6s %9ss %9ss %9ss %9s %12s %14s\n' "$r" "$x" "$p" "$a" "$rss" "$ept" "$bpt"
	echo "$x $p $a $rss $ept $bpt" >> "$work/rows"
	rm -rf "$cfg"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { # column of rows
	awk -v c="$1" '{ print $c }' "$work/rows" | grep -v '^-$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
mx=$(median 1)
mp=$(median 2)
ma=$(median 3)
echo "median xargs -P $w:    ${mx} s"
echo "median parallel -j $w: ${mp} s"
echo "median wdc apply:      ${ma} s"
awk -v a="$ma" -v x="$mx" -v p="$mp" -v w="$w" 'BEGIN {
	printf "wdc / xargs -P %d:    %.2fx\n", w, a / x
	if (p != "-") printf "wdc / parallel -j %d: %.2fx\n", w, a / p
}'
echo "apply peak RSS (max of rounds): $(awk '{ print $4 }' "$work/rows" | sort -n | tail -1) MB"
echo "entries left per task (median): $(median 5)"
echo "state bytes per task (median):  $(median 6)"
