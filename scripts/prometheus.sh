#!/usr/bin/env bash
# prometheus.sh installs Debian's prometheus package for fleetbench's real
# Prometheus test (TestPrometheusScrapesARun, docs/metrics.md), without
# letting the package start its service: the test runs the binary itself,
# on loopback, with a data directory of its own.
#
#   scripts/prometheus.sh install   install the package unless the binary exists
#   scripts/prometheus.sh path      print the binary's path; exit 1 when missing
#
# Environment:
#   FLEETBENCH_PROMETHEUS  the binary (default /usr/bin/prometheus); the test
#                          reads the same variable
set -euo pipefail

BIN=${FLEETBENCH_PROMETHEUS:-/usr/bin/prometheus}
POLICY=/usr/sbin/policy-rc.d

log() { printf 'prometheus.sh: %s\n' "$*" >&2; }

install() {
	if [ -x "$BIN" ]; then
		return 0
	fi
	local sudo=""
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || { log "not root and no sudo: install Debian's prometheus package by hand"; exit 1; }
		sudo=sudo
	fi
	# invoke-rc.d and deb-systemd-invoke ask policy-rc.d before starting a
	# service; 101 means "not now". Only a policy this script wrote is
	# removed again.
	if [ ! -e "$POLICY" ]; then
		printf '#!/bin/sh\n# written by fleetbench scripts/prometheus.sh for one install\nexit 101\n' | $sudo tee "$POLICY" >/dev/null
		$sudo chmod 755 "$POLICY"
		trap '$sudo rm -f "$POLICY"' EXIT
	fi
	local policy
	policy=$(apt-cache policy prometheus 2>/dev/null || true)
	if [[ $policy != *"Candidate: "[0-9]* ]]; then
		log "apt-get update (the package lists do not know prometheus yet)"
		$sudo apt-get update -qq
	fi
	log "installing Debian's prometheus package (its service is not started)"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	# Where systemd runs, the package enables its unit for the next boot.
	if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
		$sudo systemctl disable --now prometheus.service >/dev/null 2>&1 || true
	fi
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
