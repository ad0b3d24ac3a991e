#!/usr/bin/env bash
# chromium.sh installs Debian's chromium package for fleetbench's real
# headless-browser test of the live dashboard (TestDashboardInChromium,
# docs/dashboard.md). The test starts the browser itself, headless, with a
# fresh profile and no network beyond loopback.
#
#   scripts/chromium.sh install   install the package unless the binary exists
#   scripts/chromium.sh path      print the binary's path; exit 1 when missing
#
# Environment:
#   FLEETBENCH_CHROMIUM  the binary (default /usr/bin/chromium); the test
#                        reads the same variable
set -euo pipefail

BIN=${FLEETBENCH_CHROMIUM:-/usr/bin/chromium}

log() { printf 'chromium.sh: %s\n' "$*" >&2; }

install() {
	if [ -x "$BIN" ]; then
		return 0
	fi
	local sudo=""
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || { log "not root and no sudo: install Debian's chromium package by hand"; exit 1; }
		sudo=sudo
	fi
	local policy
	policy=$(apt-cache policy chromium 2>/dev/null || true)
	if [[ $policy != *"Candidate: "[0-9]* ]]; then
		log "apt-get update (the package lists do not know chromium yet)"
		$sudo apt-get update -qq
	fi
	log "installing Debian's chromium package"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
	[ -x "$BIN" ] || { log "installed, but $BIN is missing"; exit 1; }
	log "$("$BIN" --version 2>&1 | head -1)"
}

case "${1:-}" in
install) install ;;
path)
	[ -x "$BIN" ] || exit 1
	echo "$BIN"
	;;
*)
	echo "usage: $0 install|path" >&2
	exit 2
	;;
esac
