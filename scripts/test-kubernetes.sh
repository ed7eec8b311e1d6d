#!/usr/bin/env bash
# test-kubernetes.sh - the Kubernetes end-to-end tests against a real,
# throwaway cluster with a real node (kubelet + containerd + runc):
#  1. installs what is missing (Debian: containerd runc
#     containernetworking-plugins busybox-static; kubectl is built by the
#     testbed when there is none),
#  2. builds the testbed (WDC_K8S_NODE=kubelet k8s-testbed.sh build; cold
#     ~25 min on 2 cores, cached after) and brings it up; it always brings
#     it down again on exit, but only a testbed this run brought up,
#  3. builds bin/wdc (CGO_ENABLED=0) and imports it with /bin/busybox as
#     the image local/wdc:1, the image of `make image` (wdc-agent alone)
#     as local/wdc-agent:1 (an agent_image), /bin/busybox alone as
#     local/busybox:1 (a task image with no agent), a wdc-agent of the
#     other architecture (amd64 or arm64) as local/wdc-agent-other-arch:1,
#     and the providers/builtin test binary as local/wdc-conformance:1,
#  4. runs the provider conformance suite (TestConformance/kubernetes) and
#     the scripts of testdata/k8s-scripts (TestKubernetesScripts),
# printing how long each step took. `make test-kubernetes` runs it, and
# `make test` runs it last when CI=true or WDC_TEST_KUBERNETES=1. Needs
# root (kubelet and containerd manage cgroups and mounts).
#
# Environment:
#   WDC_K8S_TESTBED   the testbed script (default: the first shared/tools/k8s-testbed.sh
#                     beside the repository's root or one of its parents, else beside
#                     the checkout it was cloned from, for a clean clone elsewhere)
#   WDC_K8S_TESTBED_DIR, WDC_K8S_PORT_BASE, …  passed on to the testbed (read
#                     its header); the default cache is $HOME/.cache/wdc-k8s-testbed
#   GO                the go command (default go)
#   WDC_K8S_RUN       only the scripts of testdata/k8s-scripts whose names match
#                     this go test -run pattern, e.g. k8s_confined_attacker,
#                     and not the conformance suite (default: everything)
# The testbed must not run while other tests run (they are CPU-sensitive):
# run this after them, never alongside.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
# find_testbed prints the first shared/tools/k8s-testbed.sh beside the
# root or a parent of it, then beside the local checkout origin names.
find_testbed() {
	local d
	for d in "$root" "$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)"; do
		[ -n "$d" ] && [ -d "$d" ] || continue
		d=$(cd "$d" && pwd)
		while [ "$d" != / ]; do
			d=$(dirname "$d")
			[ -f "$d/shared/tools/k8s-testbed.sh" ] && { echo "$d/shared/tools/k8s-testbed.sh"; return; }
		done
	done
	echo "$root/../shared/tools/k8s-testbed.sh"
}
testbed=${WDC_K8S_TESTBED:-$(find_testbed)}
export WDC_K8S_NODE=kubelet

log_prefix=test-kubernetes
# shellcheck source=lib.sh
. "$root/scripts/lib.sh"

[ -f "$testbed" ] || die "no testbed script at $testbed: set WDC_K8S_TESTBED to the path of k8s-testbed.sh"
testbed=$(cd "$(dirname "$testbed")" && pwd)/$(basename "$testbed")
[ "$(id -u)" = 0 ] || die "the kubelet-mode testbed needs root (kubelet and containerd manage cgroups and mounts)"

install_missing() {
	local pkgs=()
	command -v containerd >/dev/null || pkgs+=(containerd)
	command -v runc >/dev/null || pkgs+=(runc)
	[ -x "${WDC_CNI_BIN_DIR:-/usr/lib/cni}/loopback" ] || pkgs+=(containernetworking-plugins)
	[ -x /bin/busybox ] || pkgs+=(busybox-static)
	for b in openssl curl; do command -v "$b" >/dev/null || pkgs+=("$b"); done
	if [ ${#pkgs[@]} -gt 0 ]; then
		log "installing ${pkgs[*]}"
		apt-get update -qq || return
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" || return
	fi
	# The image holds static binaries only: Debian's busybox package is
	# dynamically linked, busybox-static is not.
	if ldd /bin/busybox >/dev/null 2>&1; then
		log "error: /bin/busybox is dynamically linked: apt-get install busybox-static"
		return 1
	fi
	if ! command -v kubectl >/dev/null; then
		log "no kubectl on PATH: the testbed builds one (WDC_K8S_BUILD_KUBECTL=1)"
		export WDC_K8S_BUILD_KUBECTL=1
	fi
}
step "install missing packages" install_missing

dir=${WDC_K8S_TESTBED_DIR:-$HOME/.cache/wdc-k8s-testbed}

# running: whether a process of a testbed in $dir runs (the pid files hold
# "PID EXECUTABLE").
running() {
	local f pid exe
	for f in "$dir"/run/pids/*.pid; do
		[ -f "$f" ] || continue
		read -r pid exe <"$f"
		if kill -0 "$pid" 2>/dev/null && [ "$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1)" = "$exe" ]; then
			return 0
		fi
	done
	return 1
}
# A testbed up already is someone else's: never take it over or down.
if running; then
	die "a testbed already runs in $dir (someone else's?): bring it down first, or use another WDC_K8S_TESTBED_DIR and WDC_K8S_PORT_BASE"
fi
step "build the testbed" "$testbed" build

# From here on whatever runs in $dir is this run's: bring it down on exit,
# even when `up` fails half-way.
teardown() {
	local rc=$?
	step "testbed down" "$testbed" down || rc=1
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM
step "testbed up" "$testbed" up
export KUBECONFIG=$dir/kubeconfig
[ -f "$KUBECONFIG" ] || die "the testbed wrote no kubeconfig at $KUBECONFIG"
# A kubectl the testbed built is in its bin folder; the scripts call kubectl.
if [ -x "$dir/bin/kubectl" ]; then export PATH="$dir/bin:$PATH"; fi

step "build bin/wdc" env CGO_ENABLED=0 "$GO" build -o bin/wdc ./cmd/wdc
step "import image local/wdc:1" "$testbed" image wdc bin/wdc /bin/busybox
# local/wdc-agent:1 is the image `make image` writes, imported as its
# tarball into the node's containerd (the testbed's socket), so the
# agent_image scripts run exactly what users push.
import_agent_image() {
	local tarball sock=$dir/run/containerd/containerd.sock
	"$GO" run ./release image -o bin/image -version test >/dev/null || return
	tarball=$(ls bin/image/wdc-agent-test-linux-*.tar) || return
	ctr --address "$sock" --namespace k8s.io images import "$tarball" >/dev/null || return
	ctr --address "$sock" --namespace k8s.io images tag --force docker.io/library/wdc-agent:test docker.io/local/wdc-agent:1 >/dev/null
}
step "import image local/wdc-agent:1 (make image)" import_agent_image
step "import image local/busybox:1" "$testbed" image busybox /bin/busybox
# An agent for the other architecture, in an image that says it is for
# this one: what a user gets who pushes the wrong build.
other_arch=arm64
[ "$("$GO" env GOARCH)" = arm64 ] && other_arch=amd64
step "build bin/other-arch/wdc-agent ($other_arch)" env CGO_ENABLED=0 GOARCH=$other_arch "$GO" build -o bin/other-arch/wdc-agent ./cmd/wdc-agent
step "import image local/wdc-agent-other-arch:1" "$testbed" image wdc-agent-other-arch bin/other-arch/wdc-agent
step "build the conformance test binary" env CGO_ENABLED=0 "$GO" test -c -o bin/builtin.test ./providers/builtin
step "import image local/wdc-conformance:1" "$testbed" image wdc-conformance bin/builtin.test

# gotest NAME [VAR=VALUE...] ARGS...: go test ARGS in the environment
# given, failing when the test NAME was skipped (a suite skipped for want
# of its environment must not pass in CI).
gotest() {
	local name=$1 out rc=0 vars=()
	shift
	while [ $# -gt 0 ] && [[ $1 == *=* ]]; do vars+=("$1"); shift; done
	out=$(mktemp) || return
	env "${vars[@]}" "$GO" test "$@" 2>&1 | tee "$out" || rc=$?
	if grep -q -- "--- SKIP: $name " "$out"; then
		log "$name was skipped"
		rc=1
	fi
	rm -f "$out"
	return "$rc"
}

export WDC_TEST_KUBECONFIG=$KUBECONFIG
scripts=TestKubernetesScripts
if [ -n "${WDC_K8S_RUN:-}" ]; then
	# In parentheses: go test -run splits a top-level "a|b" before the "/",
	# so "k8s_a|k8s_b" would run k8s_a alone (and every top-level k8s_b).
	scripts="TestKubernetesScripts/($WDC_K8S_RUN)"
	log "WDC_K8S_RUN=$WDC_K8S_RUN: only $scripts, no conformance suite"
else
	step "conformance: TestConformance/kubernetes" gotest TestConformance/kubernetes \
		WDC_TEST_K8S_IMAGE=local/wdc-conformance:1 WDC_TEST_K8S_COMMAND=/builtin.test \
		-count=1 -timeout 15m -run 'TestConformance/kubernetes' -v ./providers/builtin
fi
step "end-to-end: $scripts" gotest TestKubernetesScripts WDC_TEST_K8S_IMAGE=local/wdc:1 \
	-count=1 -timeout 15m -run "$scripts" -v ./cmd/wdc
log "all passed"
