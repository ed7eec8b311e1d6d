#!/usr/bin/env bash
# test-ray.sh - the Ray end-to-end tests against a real, throwaway Ray head:
#  1. installs what is missing (Debian: curl, python3, python3-venv),
#  2. starts a head with scripts/ray-head.sh (which installs
#     ray[default]==2.60.0 into a virtualenv under $HOME/.cache/wdc-ray the
#     first time: ~25-40 s, ~400 MB; the head takes ~630 MB and is ready in
#     5-16 s); it always stops it again on exit, but only a head this run
#     started,
#  3. builds bin/wdc (CGO_ENABLED=0), the wdc the Ray jobs run (they run on
#     this machine), and bin/wdc-agent, the agent a pool without wdc_path
#     uploads to the head,
#  4. runs the provider conformance suite (TestConformance/ray) and the
#     scripts of testdata/ray-scripts (TestRayScripts, one at a time: they
#     share the head's 2 CPUs),
# printing how long each step took, and failing when either suite was
# skipped or did not run. `make test-ray` runs it, and `make test` runs it
# after test-kubernetes when CI=true or WDC_TEST_KUBERNETES=1 (or alone
# with WDC_TEST_RAY=1).
#
# Environment:
#   WDC_TEST_RAY_ADDRESS, WDC_TEST_RAY_TOKEN_FILE  a head to use instead of
#                     starting one (its Jobs API URL and token file); then
#                     nothing is started or stopped
#   WDC_RAY_DIR, WDC_RAY_DASHBOARD_PORT, WDC_RAY_CACHE, …  passed on to
#                     scripts/ray-head.sh (read its header)
#   GO                the go command (default go)
#   WDC_RAY_RUN       only the scripts of testdata/ray-scripts whose names match
#                     this go test -run pattern, e.g. ray_apply, and not the
#                     conformance suite (default: everything)
# Run it after the other tests, never alongside (the head and its jobs are
# CPU-hungry on 2 cores).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
head=$root/scripts/ray-head.sh

log_prefix=test-ray
# shellcheck source=lib.sh
. "$root/scripts/lib.sh"

install_missing() {
	local pkgs=()
	command -v curl >/dev/null || pkgs+=(curl)
	command -v python3 >/dev/null || pkgs+=(python3)
	python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
	[ ${#pkgs[@]} -gt 0 ] || return 0
	command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] ||
		{ log "error: install ${pkgs[*]} (python3 >= 3.10 with its venv module)"; return 1; }
	log "installing ${pkgs[*]}"
	apt-get update -qq || return
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"
}

if [ -n "${WDC_TEST_RAY_ADDRESS:-}" ]; then
	log "using the head at $WDC_TEST_RAY_ADDRESS (WDC_TEST_RAY_ADDRESS): starting and stopping nothing"
else
	step "install missing packages" install_missing
	# A head up already is someone else's: never take it over or stop it.
	rc=0
	"$head" status >/dev/null 2>&1 || rc=$?
	[ "$rc" = 1 ] || die "a Ray head already runs in ${WDC_RAY_DIR:-/tmp/wdc-ray-$(id -u)} (someone else's?): stop it first (scripts/ray-head.sh stop), or use another WDC_RAY_DIR and WDC_RAY_DASHBOARD_PORT"
	step "install ray" "$head" install
	# From here on the head of WDC_RAY_DIR is this run's: stop it on exit,
	# even when start fails half-way (ray-head.sh stop touches nothing
	# else).
	teardown() {
		local rc=$?
		step "stop the head" "$head" stop || rc=1
		exit "$rc"
	}
	trap teardown EXIT
	trap 'exit 130' INT TERM
	envfile=$(mktemp)
	step "start the head" "$head" start >"$envfile"
	# shellcheck disable=SC1090 # export lines of ray-head.sh
	. "$envfile"
	rm -f "$envfile"
fi
[ -n "${WDC_TEST_RAY_ADDRESS:-}" ] || die "no WDC_TEST_RAY_ADDRESS"

step "build bin/wdc" env CGO_ENABLED=0 "$GO" build -o bin/wdc ./cmd/wdc
step "build bin/wdc-agent" env CGO_ENABLED=0 "$GO" build -o bin/wdc-agent ./cmd/wdc-agent
export WDC_TEST_RAY_ADDRESS WDC_TEST_RAY_TOKEN_FILE=${WDC_TEST_RAY_TOKEN_FILE:-} WDC_TEST_RAY_WDC=$root/bin/wdc WDC_TEST_RAY_AGENT=$root/bin/wdc-agent

# gotest NAME ARGS...: go test ARGS, failing when the test NAME was skipped
# or did not run at all (a suite skipped for want of its environment, or
# missing, must not pass in CI).
gotest() {
	local name=$1 out rc=0
	shift
	out=$(mktemp) || return
	"$GO" test "$@" 2>&1 | tee "$out" || rc=$?
	if grep -q -- "--- SKIP: $name " "$out"; then
		log "$name was skipped"
		rc=1
	elif ! grep -q -- "--- \(PASS\|FAIL\): $name " "$out"; then
		log "$name did not run"
		rc=1
	fi
	rm -f "$out"
	return "$rc"
}

scripts=TestRayScripts
if [ -n "${WDC_RAY_RUN:-}" ]; then
	# In parentheses: go test -run splits a top-level "a|b" before the "/",
	# so "ray_a|ray_b" would run ray_a alone (and every top-level ray_b).
	scripts="TestRayScripts/($WDC_RAY_RUN)"
	log "WDC_RAY_RUN=$WDC_RAY_RUN: only $scripts, no conformance suite"
else
	step "conformance: TestConformance/ray" gotest TestConformance/ray \
		-count=1 -timeout 15m -run 'TestConformance/ray' -v ./providers/builtin
fi
step "end-to-end: $scripts" gotest TestRayScripts \
	-count=1 -timeout 15m -parallel 1 -run "$scripts" -v ./cmd/wdc
log "all passed"
