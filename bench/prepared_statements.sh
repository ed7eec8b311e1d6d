#!/usr/bin/env bash
# What the SQLite driver's re-preparing costs, measured side by side: this
# checkout's build (github.com/glebarez/go-sqlite, which parses and plans
# every statement again at each execution) against the same checkout with
# bench/prepared_statements.patch applied, which opens the state through
# modernc.org/sqlite (the library glebarez/go-sqlite was forked from; it
# keeps a prepared statement's handle) and keeps one prepared statement per
# query and connection. The patch is a measurement, not a build to ship:
# the state keeps its driver (docs/sqlite.md). With it, go test ./state/
# ./engine/... passes but for one case of TestInspect (modernc.org/sqlite
# fails to read the schema of a file with corrupt pages where glebarez
# reads it).
#
#   bench/prepared_statements.sh [R]      (default 3 rounds)
#
# Both builds are of HEAD. Each round runs, alternating the two builds: the statements of a claim,
# an accept and an accept with its next lease (TestStatementsPerClaimAndAccept,
# mean µs per operation, BEGIN to COMMIT), BenchmarkClaim api and http with
# 8 claimers (coord_claims/s), and `wdc apply` of 1,000 `true` tasks on 2
# local workers (wall, user and system seconds of the apply and its
# agents). The patch is made for the commit it was written at; when it no
# longer applies, the script says so and stops.
set -euo pipefail
rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/prepared" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
[ -x /usr/bin/time ] || { echo "bench/prepared_statements.sh needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }

# Both builds are of this checkout's HEAD (commit what you want measured).
git -C "$root" worktree add -q --detach "$work/prepared" HEAD
(cd "$work/prepared" && CGO_ENABLED=0 go build -o "$work/wdc-reparsed" ./cmd/wdc && go test -c -o "$work/coord-reparsed.test" ./engine/coordinator/)
if ! git -C "$work/prepared" apply "$root/bench/prepared_statements.patch"; then
	echo "bench/prepared_statements.patch no longer applies to this checkout: refresh it" >&2
	exit 2
fi
(cd "$work/prepared" && CGO_ENABLED=0 go build -o "$work/wdc-prepared" ./cmd/wdc && go test -c -o "$work/coord-prepared.test" ./engine/coordinator/)

cat > "$work/main.wdc.hcl" <<HCL
pool "p" {
  provider = "local"
  max      = 2
}

task "t" {
  count   = 1000
  command = ["true"]
}
HCL

echo "cores: $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
	for b in reparsed prepared; do
		echo "== round $r, $b"
		(cd "$root/engine/coordinator" && "$work/coord-$b.test" -test.count=1 -test.run '^TestStatementsPerClaimAndAccept$' -test.v) |
			grep -E 'statements per op' | sed 's/^ *statements_test.go:[0-9]*: /  /'
		(cd "$root/engine/coordinator" && "$work/coord-$b.test" -test.run '^$' -test.bench 'BenchmarkClaim/(api|http)/claimers=8' -test.benchtime 2000x) |
			awk '/coord_claims\/s/ { for (i = 1; i < NF; i++) if ($(i + 1) == "coord_claims/s") printf "  %s %s coord_claims/s\n", $1, $i }'
		rm -rf "$work/.wdc"
		/usr/bin/time -f "  apply 1000 true tasks, 2 workers: %e s wall, %U s user, %S s sys" \
			"$work/wdc-$b" --chdir "$work" apply --auto-approve > "$work/apply.log"
		grep -q '^Apply complete! Tasks: 1000 succeeded' "$work/apply.log" || { tail -5 "$work/apply.log" >&2; exit 1; }
		sleep 30 # this file system slows inode allocation after many removals (docs/PERFORMANCE.md, "Inodes per attempt")
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
