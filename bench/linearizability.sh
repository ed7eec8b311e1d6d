#!/usr/bin/env bash
# The long linearizability check (engine's TestLinearizabilityLong): N
# histories of simulated workers against one coordinator over loopback
# HTTP, each checked with porcupine against the lease model, with workers
# that vanish mid-attempt, revokes and coordinator restarts. Prints the
# summary, ending with "histories checked: N, violations: M"; exits 1 when
# a history is not linearizable or a run failed. The porcupine
# visualization of each violation is kept in a folder it names.
#
#   bench/linearizability.sh [N | DURATION] [SEED]
#       N histories (default 200), or as many as fit in DURATION (e.g. 10m);
#       SEED is the first history's seed (default 1). RACE=1 adds -race;
#       heartbeats are checked as one step (the coordinator makes each one
#       write); WDC_LINEARIZABILITY_TWO_STEP_HEARTBEATS=1 allows two.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-200}
seed=${2:-1}
out=$(mktemp -d "${TMPDIR:-/tmp}/wdc-linearizability.XXXXXX")

export WDC_LINEARIZABILITY_LONG=1 WDC_LINEARIZABILITY_SEED=$seed WDC_LINEARIZABILITY_OUT=$out
case $what in
*[!0-9]*) export WDC_LINEARIZABILITY_DURATION=$what ;;
*) export WDC_LINEARIZABILITY_HISTORIES=$what ;;
esac
race=()
[ "${RACE:-}" = 1 ] && race=(-race)

rc=0
(cd "$root" && go test "${race[@]}" -count=1 -timeout 0 -v -run '^TestLinearizabilityLong$' ./engine/coordinator) > "$out/test.log" 2>&1 || rc=$?
grep -E 'seed [0-9]+ .*(not linearizable|timed out)|: not linearizable|calls: |check time per history|two-step heartbeats: |histories checked' "$out/test.log" | sed 's/^ *linearizability_test.go:[0-9]*: //'
if [ "$rc" != 0 ]; then
	echo "FAILED (exit $rc): the log and visualizations are in $out" >&2
	exit 1
fi
rm -rf "$out"
