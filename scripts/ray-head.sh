#!/usr/bin/env bash
# ray-head.sh - a throwaway local Ray head for the Ray end-to-end tests
# (scripts/test-ray.sh; a developer runs the same thing as CI):
#
#   ray-head.sh install  installs ray[default]==2.60.0 into a virtualenv
#                        under the cache folder (once: ~25 s cold, ~400 MB)
#   ray-head.sh start    installs when needed, generates a token (a 0600
#                        file), starts a head on 127.0.0.1 with token
#                        authentication (RAY_AUTH_MODE=token), waits until
#                        GET /api/version answers with that token, and
#                        prints the environment a test needs (as `env`)
#   ray-head.sh status   exits 0 when the head of WDC_RAY_DIR runs and
#                        answers, printing its /api/version; 1 when none
#                        of its processes runs, 3 when some run but
#                        /api/version does not answer
#   ray-head.sh env      prints, as export lines, the dashboard address and
#                        the token file of the running head:
#                        WDC_TEST_RAY_ADDRESS, WDC_TEST_RAY_TOKEN_FILE (what
#                        the tests read) and RAY_ADDRESS,
#                        RAY_AUTH_TOKEN_PATH (what the ray CLI reads)
#   ray-head.sh stop     stops the head of WDC_RAY_DIR (ray stop --force
#                        with its environment) and checks none of its
#                        processes is left
#
# `start` refuses when a Ray process already runs on this machine: `ray
# stop` ends every Ray process it may signal, so a head started beside
# another one could not be stopped alone. `stop` does nothing but say so
# when no process of the head of WDC_RAY_DIR runs.
#
# The head: one node, 2 CPUs (--num-cpus), a 200 MB object store, no usage
# stats, the GCS on a free port (--port=0), the dashboard and its Jobs API
# on 127.0.0.1:WDC_RAY_DASHBOARD_PORT, Ray's files under WDC_RAY_DIR/temp;
# a job that cannot start (more CPUs asked than the head has) fails after
# RAY_JOB_START_TIMEOUT_SECONDS (60 here; Ray's default is 900).
#
# Environment:
#   WDC_RAY_CACHE           the cache folder (default $HOME/.cache/wdc-ray)
#   WDC_RAY_VENV            the virtualenv (default $WDC_RAY_CACHE/venv)
#   WDC_RAY_PYTHON          the python that makes it (default python3, >= 3.10)
#   WDC_RAY_DIR             the head's own folder: its token, env and Ray's
#                           temp dir (default /tmp/wdc-ray-$UID: Ray's unix
#                           socket paths must stay short)
#   WDC_RAY_DASHBOARD_PORT  the Jobs API port (default 8265)
#   WDC_RAY_START_TIMEOUT   seconds to wait for /api/version (default 120)
#   WDC_RAY_JOB_START_TIMEOUT  RAY_JOB_START_TIMEOUT_SECONDS (default 60)
set -euo pipefail

RAY_VERSION=2.60.0
cache=${WDC_RAY_CACHE:-$HOME/.cache/wdc-ray}
venv=${WDC_RAY_VENV:-$cache/venv}
python=${WDC_RAY_PYTHON:-python3}
dir=${WDC_RAY_DIR:-/tmp/wdc-ray-$(id -u)}
port=${WDC_RAY_DASHBOARD_PORT:-8265}
start_timeout=${WDC_RAY_START_TIMEOUT:-120}
job_start_timeout=${WDC_RAY_JOB_START_TIMEOUT:-60}
temp=$dir/temp
token_file=$dir/token
address=http://127.0.0.1:$port

log_prefix=ray-head
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

# elapsed T0: seconds since T0 (date +%s.%N), one decimal.
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

install() {
	local marker=$venv/.wdc-ray-$RAY_VERSION t0
	[ -f "$marker" ] && [ -x "$venv/bin/ray" ] && return 0
	command -v "$python" >/dev/null || die "no $python: install python3 (>= 3.10) with its venv module, or set WDC_RAY_PYTHON"
	t0=$(date +%s.%N)
	log "installing ray[default]==$RAY_VERSION into $venv"
	rm -rf "$venv"
	mkdir -p "$(dirname "$venv")"
	"$python" -m venv "$venv" || die "$python -m venv failed (Debian: apt-get install python3-venv)"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check "ray[default]==$RAY_VERSION" ||
		die "pip install ray[default]==$RAY_VERSION failed"
	[ "$("$venv/bin/ray" --version)" = "ray, version $RAY_VERSION" ] || die "$venv/bin/ray is not ray $RAY_VERSION"
	touch "$marker"
	log "installed in $(elapsed "$t0")"
}

# head_pids prints the pids of the processes of the head of $dir: those
# whose command line names its temp dir (the GCS, the raylet, the
# dashboard, …), those that inherited the head's environment
# (WDC_RAY_HEAD=$dir, set on `ray start` only: the jobs' processes, even
# orphaned ones), and their descendants (Ray's set proctitle, which hides
# both). Never this shell nor its ancestors.
head_pids() {
	local p cmd env seeds=
	for p in /proc/[0-9]*; do
		cmd=$( { tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null) || continue
		env=$( { tr '\0' '\n' <"$p/environ"; } 2>/dev/null) || env=
		if [[ $cmd == *"$temp"* || $'\n'$env$'\n' == *$'\n'"WDC_RAY_HEAD=$dir"$'\n'* ]]; then
			seeds+=" ${p#/proc/}"
		fi
	done
	[ -n "$seeds" ] || return 0
	ps -e -o pid= -o ppid= | awk -v seeds="$seeds" -v self=$$ '
		{ parent[$1] = $2 }
		END {
			for (p = self; p in parent && p > 1; p = parent[p]) skip[p] = 1
			n = split(seeds, s, " ")
			for (i = 1; i <= n; i++) if (s[i] in parent) mine[s[i]] = 1
			for (more = 1; more; ) {
				more = 0
				for (p in parent) if (!(p in mine) && (parent[p] in mine)) { mine[p] = 1; more = 1 }
			}
			for (p in mine) if (!(p in skip)) print p
		}' | sort -n
}

# other_ray prints the command lines of the Ray processes of this machine
# that are not the head of $dir's (names as `ray stop` matches them).
other_ray() {
	local mine p
	mine=" $(head_pids | tr '\n' ' ') "
	for p in /proc/[0-9]*; do
		[[ $mine == *" ${p#/proc/} "* ]] && continue
		{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null |
			grep -E '(^|/)(gcs_server|raylet|plasma_store) |ray/dashboard/(dashboard|agent)\.py|ray/_private/(log_monitor|monitor|runtime_env/agent/main)\.py|default_worker\.py' ||
			true
	done
}

answers() {
	[ -f "$token_file" ] || return 1
	curl -fsS --max-time 5 -H "Authorization: Bearer $(cat "$token_file")" "$address/api/version" 2>/dev/null
}

print_env() {
	cat <<EOF
export WDC_TEST_RAY_ADDRESS=$address
export WDC_TEST_RAY_TOKEN_FILE=$token_file
export RAY_ADDRESS=$address
export RAY_AUTH_TOKEN_PATH=$token_file
EOF
}

status() {
	if [ -z "$(head_pids)" ]; then
		log "no head runs in $dir"
		return 1
	fi
	if ! answers; then
		log "the head of $dir runs but $address/api/version does not answer"
		return 3
	fi
	echo
}

start() {
	local t0 others token
	install
	[ -z "$(head_pids)" ] || die "a head already runs in $dir: ray-head.sh stop first, or use another WDC_RAY_DIR"
	others=$(other_ray)
	[ -z "$others" ] || die "Ray processes already run on this machine (ray stop would end them too):
$others"
	if curl -sS --max-time 2 -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
		die "something already listens on 127.0.0.1:$port: set WDC_RAY_DASHBOARD_PORT"
	fi
	rm -rf "$dir"
	mkdir -p "$temp"
	chmod 700 "$dir"
	token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
	(umask 077 && printf '%s\n' "$token" >"$token_file")
	t0=$(date +%s.%N)
	log "starting a head in $dir, Jobs API on $address"
	if ! env WDC_RAY_HEAD="$dir" RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$token_file" \
		RAY_JOB_START_TIMEOUT_SECONDS="$job_start_timeout" \
		"$venv/bin/ray" start --head --node-ip-address=127.0.0.1 --port=0 \
		--dashboard-host=127.0.0.1 --dashboard-port="$port" --include-dashboard=true \
		--num-cpus=2 --object-store-memory=200000000 --disable-usage-stats \
		--temp-dir="$temp" >"$dir/start.log" 2>&1; then
		cat "$dir/start.log" >&2
		stop || true
		die "ray start failed (its output is above)"
	fi
	while ! answers >/dev/null; do
		if awk -v a="$t0" -v b="$(date +%s.%N)" -v t="$start_timeout" 'BEGIN { exit !(b - a > t) }'; then
			cat "$dir/start.log" >&2
			stop || true
			die "$address/api/version did not answer within ${start_timeout}s"
		fi
		sleep 0.5
	done
	print_env >"$dir/env"
	log "head ready in $(elapsed "$t0"): $(answers)"
	print_env
}

stop() {
	local pids t0 i
	pids=$(head_pids)
	if [ -z "$pids" ]; then
		log "no head runs in $dir"
		return 0
	fi
	t0=$(date +%s.%N)
	if [ -n "$(other_ray)" ]; then
		# ray stop would end them too: kill this head's processes only.
		log "other Ray processes run on this machine: killing only the head of $dir"
		kill -KILL $pids 2>/dev/null || true
	else
		env RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$token_file" \
			"$venv/bin/ray" stop --force >"$dir/stop.log" 2>&1 || { cat "$dir/stop.log" >&2; }
	fi
	for i in $(seq 50); do
		pids=$(head_pids)
		[ -z "$pids" ] && break
		[ "$i" = 30 ] && kill -KILL $pids 2>/dev/null
		sleep 0.2
	done
	[ -z "$pids" ] || die "processes of the head of $dir are left: $(echo $pids)"
	rm -f "$dir/env"
	log "stopped in $(elapsed "$t0")"
}

case ${1:-} in
install) install ;;
start) start ;;
stop) stop ;;
status) status ;;
env)
	status >/dev/null
	print_env
	;;
*)
	echo "usage: $0 install|start|stop|status|env" >&2
	exit 2
	;;
esac
