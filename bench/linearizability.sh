#!/usr/bin/env bash
# The long linearizability check (engine's TestLinearizabilityLong), in two
# modes, one after the other:
#   in-process: N histories of simulated workers against one coordinator
#       over loopback HTTP on a fake clock, with workers that vanish
#       mid-attempt, revokes and clean coordinator restarts;
#   crash: N histories whose coordinator runs in a child process on the
#       real clock and is killed with SIGKILL 1 to KILLS times (default 2)
#       while calls are in flight, each call it cut checked as of unknown
#       outcome.
# Each history is checked with porcupine against the lease model. Prints
# each mode's summary, ending with "histories checked: N, violations: M";
# exits 1 when a history is not linearizable or a run failed. The
# porcupine visualization of each violation is kept in a folder it names.
#
#   bench/linearizability.sh [N | DURATION] [SEED]
#       N histories per mode (default 200), or as many as fit in DURATION
#       per mode (e.g. 10m); SEED is the first history's seed (default 1).
#       MODES="in-process crash" (the default) picks the modes, KILLS the
#       most kills per crash history. RACE=1 adds -race; heartbeats are
#       checked as one step (the coordinator makes each one write);
#       WDC_LINEARIZABILITY_TWO_STEP_HEARTBEATS=1 allows two.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-200}
seed=${2:-1}
out=$(mktemp -d "${TMPDIR:-/tmp}/wdc-linearizability.XXXXXX")

export WDC_LINEARIZABILITY_LONG=1 WDC_LINEARIZABILITY_SEED=$seed
case $what in
*[!0-9]*) export WDC_LINEARIZABILITY_DURATION=$what ;;
*) export WDC_LINEARIZABILITY_HISTORIES=$what ;;
esac
race=()
[ "${RACE:-}" = 1 ] && race=(-race)

failed=0
for mode in ${MODES:-in-process crash}; do
	case $mode in
	in-process) kills=0 ;;
	crash) kills=${KILLS:-2} ;;
	*) echo "unknown mode $mode (in-process, crash)" >&2; exit 2 ;;
	esac
	mkdir -p "$out/$mode"
	echo "== $mode"
	rc=0
	start=$(date +%s)
	(cd "$root" && WDC_LINEARIZABILITY_KILLS=$kills WDC_LINEARIZABILITY_OUT=$out/$mode \
		go test "${race[@]}" -count=1 -timeout 0 -v -run '^TestLinearizabilityLong$' ./engine/coordinator) > "$out/$mode/test.log" 2>&1 || rc=$?
	grep -E 'seed [0-9]+ .*(not linearizable|timed out)|: not linearizable|calls: |check time per history|two-step heartbeats: |kills: |histories checked' "$out/$mode/test.log" | sed 's/^ *linearizability_test.go:[0-9]*: //'
	echo "($(( $(date +%s) - start )) s, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'))"
	if [ "$rc" != 0 ]; then
		echo "FAILED (exit $rc): the log and visualizations are in $out/$mode" >&2
		failed=1
	fi
done
[ "$failed" = 0 ] || exit 1
rm -rf "$out"
