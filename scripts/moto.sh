#!/usr/bin/env bash
# moto.sh - the S3-compatible server the backend tests run against:
# moto's server (PyPI moto[s3] with flask and flask-cors: what
# moto[server] needs for S3, 140 MB instead of 320), version 5.2.5, which
# refuses a PUT whose If-None-Match or If-Match does not hold with 412.
#
#   moto.sh install   installs it into a virtualenv under
#                     $HOME/.cache/wdc-moto (about 20 s the first time;
#                     nothing when it is there), installing python3 and
#                     its venv module first when missing (Debian, as root)
#
# The tests start the server themselves, on 127.0.0.1 and a free port
# (internal/s3test finds $HOME/.cache/wdc-moto/bin/moto_server, or
# WDC_TEST_MOTO_SERVER, or moto_server on PATH, and checks it refuses a
# conditional PUT that must fail). `make test` runs `moto.sh install`
# when CI=true or WDC_TEST_S3=1; outside CI a test without the server is
# skipped, saying so.
#
# Environment:
#   WDC_MOTO_VENV    the virtualenv (default $HOME/.cache/wdc-moto)
#   WDC_MOTO_PYTHON  the python that makes it (default python3)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
log_prefix=moto
# shellcheck source=lib.sh
. "$root/scripts/lib.sh"

MOTO_VERSION=5.2.5
FLASK_VERSION=3.1.3
FLASK_CORS_VERSION=6.0.5
venv=${WDC_MOTO_VENV:-$HOME/.cache/wdc-moto}
python=${WDC_MOTO_PYTHON:-python3}

install_python() {
	command -v "$python" >/dev/null && "$python" -c 'import venv, ensurepip' 2>/dev/null && return 0
	command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] ||
		die "install python3 with its venv module, or set WDC_MOTO_PYTHON"
	log "installing python3 python3-venv"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv
}

install() {
	local marker=$venv/.wdc-moto-$MOTO_VERSION
	[ -f "$marker" ] && [ -x "$venv/bin/moto_server" ] && return 0
	install_python
	log "installing moto[s3]==$MOTO_VERSION into $venv"
	rm -rf "$venv"
	mkdir -p "$(dirname "$venv")"
	"$python" -m venv "$venv" || die "$python -m venv failed (Debian: apt-get install python3-venv)"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check \
		"moto[s3]==$MOTO_VERSION" "flask==$FLASK_VERSION" "flask-cors==$FLASK_CORS_VERSION" ||
		die "pip install moto[s3]==$MOTO_VERSION failed"
	[ -x "$venv/bin/moto_server" ] || die "$venv/bin/moto_server is missing after the install"
	touch "$marker"
}

case ${1:-} in
install) step "install moto $MOTO_VERSION" install ;;
*) die "usage: moto.sh install" ;;
esac
