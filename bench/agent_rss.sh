#!/usr/bin/env bash
# Peak RSS of one `wdc agent` above that of `wdc version`, measured side by
# side with one build: the agent idle (registered, no task, for a few
# seconds) and busy (one local worker running 200 tasks of a real
# `wdc apply`), over plain HTTP on loopback (apply's default) and over
# HTTPS (the coordinator's own CA, pinned). Each is run RUNS times; the
# medians and the agent's excess over version are printed in MiB.
#
#   bench/agent_rss.sh [RUNS]      (default RUNS=3)
#
# AGENT_ENV="NAME=VALUE ..." adds variables to the agents' environment only
# (a pool's local { env }, and the idle agent's), e.g. AGENT_ENV=GOGC=50 to
# see what a setting does to the agent and not to version.
#
# Peak RSS is the kernel's high-water mark: /usr/bin/time's %M for
# version (run 3 times before each agent's run, so both see the page
# cache in the same state), VmHWM of /proc/<pid>/status for an agent (read
# every 50 ms while a busy agent runs, the last read kept; read after the
# idle period for an idle one). Everything talks to 127.0.0.1 only.
set -euo pipefail
runs=${1:-3}
read -r -a agent_env <<< "${AGENT_ENV:-}"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
wdc=$work/wdc
(cd "$root" && CGO_ENABLED=0 go build -o "$wdc" ./cmd/wdc)
# Drop the new binary from the page cache: the linker's writes leave it in
# large folios, which the kernel may map 2 MiB at a time, so each command's
# RSS would depend on which folios it happened to touch. Read back from
# disk, as an installed binary is, its pages come in as the commands
# fault them.
sync "$wdc"
dd if=/dev/null of="$wdc" oflag=nocache conv=notrunc,fdatasync count=0 status=none

# wdc_block SCHEME: the wdc block of a configuration served over SCHEME.
wdc_block() {
	if [ "$1" = https ]; then
		# Not loopback, so apply serves HTTPS with its CA; the workers are
		# told a loopback URL, which its certificate covers.
		printf 'wdc {\n  listen    = "0.0.0.0:0"\n  advertise = "https://127.0.0.1"\n}\n\n'
	fi
}

# local_env: a local pool's block of AGENT_ENV, if any.
local_env() {
	local kv
	[ "${#agent_env[@]}" -gt 0 ] || return 0
	printf '\n  local {\n    env = {\n'
	for kv in "${agent_env[@]}"; do
		printf '      %s = "%s"\n' "${kv%%=*}" "${kv#*=}"
	done
	printf '    }\n  }\n'
}

# busy_config DIR SCHEME: one local worker; 100 tasks that print nothing,
# 80 that print 110 kB to stdout and 9 kB to stderr, 20 that write a
# 1 MiB output (uploaded).
busy_config() {
	mkdir -p "$1"
	{
		wdc_block "$2"
		cat <<'HCL'
pool "p" {
  provider = "local"
  max      = 1
HCL
		local_env
		cat <<'HCL'
}

task "quiet" {
  count   = 100
  command = ["true"]
}

task "print" {
  count   = 80
  command = ["sh", "-c", "seq 1 20000; seq 1 2000 >&2"]
}

task "output" {
  count   = 20
  command = ["sh", "-c", "head -c 1048576 /dev/urandom > out.bin"]
  outputs = ["out.bin"]
}
HCL
	} > "$1/main.wdc.hcl"
}

# idle_config DIR SCHEME: an external pool whose one task waits 8 s for a
# task of a local pool, so a worker that joins it sits idle until then.
idle_config() {
	mkdir -p "$1"
	{
		wdc_block "$2"
		cat <<'HCL'
pool "edge" {
  provider = "external"
  labels   = { site = "edge" }
}

pool "here" {
  provider = "local"
  labels   = { site = "here" }
}

task "wait" {
  command   = ["sleep", "8"]
  placement = { site = "here" }
}

task "after" {
  command    = ["true"]
  placement  = { site = "edge" }
  depends_on = [task.wait]
}
HCL
	} > "$1/main.wdc.hcl"
}

# hwm PID: the VmHWM (kB) of PID, or nothing once it has exited.
hwm() {
	local key val rest
	while read -r key val rest; do
		if [ "$key" = VmHWM: ]; then
			echo "$val"
			return
		fi
	done < "/proc/$1/status" 2> /dev/null || true
}

# is_agent PID: whether PID runs `wdc agent`.
is_agent() {
	local args=()
	{ mapfile -d '' args < "/proc/$1/cmdline"; } 2> /dev/null || return 1
	[ "${#args[@]}" -gt 1 ] && [ "${args[1]}" = agent ]
}

# busy_run DIR: runs apply in DIR and prints the peak RSS (kB) of the
# agent that ran the most (the largest of its agents' last VmHWM reads).
busy_run() {
	local dir=$1 apid kid f v state peak=0
	local -A last=()
	"$wdc" --chdir "$dir" apply --auto-approve > "$dir/apply.log" 2>&1 &
	apid=$!
	while :; do
		state=$(awk '$1 == "State:" {print $2}' "/proc/$apid/status" 2> /dev/null || true)
		[ -n "$state" ] && [ "$state" != Z ] || break
		for f in /proc/"$apid"/task/*/children; do
			for kid in $(cat "$f" 2> /dev/null); do
				is_agent "$kid" || continue
				v=$(hwm "$kid")
				[ -n "$v" ] && last[$kid]=$v
			done
		done
		sleep 0.05
	done
	wait "$apid" || { cat "$dir/apply.log" >&2; return 1; }
	grep -q '^Apply complete! Tasks: 200 succeeded' "$dir/apply.log" || { cat "$dir/apply.log" >&2; return 1; }
	for v in "${last[@]}"; do
		[ "$v" -gt "$peak" ] && peak=$v
	done
	echo "$peak"
}

# idle_run DIR: runs apply in DIR, joins its external pool with an agent
# of its own, and prints the agent's peak RSS (kB) after it was
# registered and idle for 4 s.
idle_run() {
	local dir=$1 apid agpid url peak i
	"$wdc" --chdir "$dir" join-token create edge -o "$dir/join.json" 2> /dev/null
	"$wdc" --chdir "$dir" apply --auto-approve > "$dir/apply.log" 2>&1 &
	apid=$!
	for i in $(seq 200); do
		url=$(sed -n 's/^awaiting_workers pool\.edge: .*--server \([^ ]*\) .*/\1/p' "$dir/apply.log" 2> /dev/null || true)
		[ -n "$url" ] && break
		sleep 0.05
	done
	[ -n "$url" ] || { cat "$dir/apply.log" >&2; return 1; }
	env "${agent_env[@]}" "$wdc" agent --server "$url" --pool edge --join-file "$dir/join.json" --work-dir "$dir/node" > "$dir/agent.log" 2>&1 &
	agpid=$!
	for i in $(seq 200); do
		grep -qs 'msg=registered' "$dir/agent.log" && break
		sleep 0.05
	done
	grep -q 'msg=registered' "$dir/agent.log" || { cat "$dir/agent.log" >&2; return 1; }
	sleep 4
	peak=$(hwm "$agpid")
	grep -q 'leased *task.after' "$dir/apply.log" && { echo "the idle agent got its task too soon" >&2; return 1; }
	wait "$agpid"
	wait "$apid" || { cat "$dir/apply.log" >&2; return 1; }
	echo "$peak"
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

# version_runs: runs wdc version 3 times, adding its peak RSS (kB) to
# versions.
versions=""
version_runs() {
	local i
	for i in 1 2 3; do
		versions="$versions $(/usr/bin/time -f %M "$wdc" version 2>&1 > /dev/null)"
	done
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
results=()
for scheme in http https; do
	for kind in idle busy; do
		peaks=""
		for run in $(seq "$runs"); do
			dir=$work/$kind-$scheme-$run
			"${kind}_config" "$dir" "$scheme"
			version_runs
			peaks="$peaks $("${kind}_run" "$dir")"
		done
		results+=("$kind $scheme $(median <<< "$peaks") $peaks")
	done
done
version=$(median <<< "$versions")
echo "wdc version: peak RSS median $(mib "$version") MiB of $(wc -w <<< "$versions") runs (kB:$versions)"
for r in "${results[@]}"; do
	read -r kind scheme m peaks <<< "$r"
	printf 'agent %s, %s: peak RSS median %s MiB, %s MiB above version (kB: %s)\n' \
		"$kind" "$scheme" "$(mib "$m")" "$(mib $((m - version)))" "$peaks"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
