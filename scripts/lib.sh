# lib.sh - what the scripts under scripts/ share; source it after setting
# log_prefix (the name in brackets on every line they print):
#   log MSG...       a line on stderr
#   die MSG...       an error line, then exit 1
#   step NAME CMD... runs CMD, printing NAME before and how long it took after

log() { printf '[%s] %s\n' "$log_prefix" "$*" >&2; }
die() { log "error: $*"; exit 1; }

step() {
	local name=$1 t0 rc=0
	shift
	log "$name ..."
	t0=$(date +%s.%N)
	"$@" || rc=$?
	log "$name: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')$([ "$rc" = 0 ] || echo ", FAILED (exit $rc)")"
	return "$rc"
}
