#!/usr/bin/env bash
# test-tiers.sh helps the Makefile run the test tiers (docs/testing.md).
#
#   scripts/test-tiers.sh pkgs TAG   the packages with test files tagged TAG
#   scripts/test-tiers.sh run TAG    a -run pattern of the tests in those files
#   scripts/test-tiers.sh notice     say what `make test` will install and
#                                    build before it does, when anything is
#                                    missing; silent when all is cached
#
# A tagged tier's tests are named rather than selected by package: the
# packages that hold them also hold unit tests, which the unit tier runs.
# A file belongs to TAG when its //go:build line names TAG and no other
# tag (files shared between tiers, such as proc_test.go, hold helpers and
# no tests).
set -euo pipefail
cd "$(dirname "$0")/.."

files() { # files TAG: the test files whose build constraint is exactly TAG
	git ls-files --cached --others --exclude-standard '*_test.go' |
		while IFS= read -r f; do
			[ -f "$f" ] || continue
			if [ "$(head -n 1 "$f")" = "//go:build $1" ]; then echo "$f"; fi
		done
}

case ${1:-} in
pkgs)
	files "$2" | xargs -r -n1 dirname | sort -u | sed 's|^\.$|.|; s|^\([^.]\)|./\1|'
	;;
run)
	names=$(files "$2" | { xargs -r grep -ohE '^func (Test|Example)[A-Za-z0-9_]*' || true; } | sed 's/^func //' | sort -u | paste -sd'|')
	[ -n "$names" ] || { echo "test-tiers.sh: no tests tagged $2" >&2; exit 1; }
	echo "^($names)\$"
	;;
notice)
	tools=${TOOLS_DIR:-$HOME/.cache/fleetbench/tools}
	kube=${FLEETBENCH_KUBE_CACHE:-$HOME/.cache/fleetbench/kube-$(sed -n 's/^KUBE_VERSION=//p' scripts/kube-env.sh)}
	missing=()
	[ -x "$tools/bin/golangci-lint-${GOLANGCI_LINT_VERSION:-}" ] || missing+=("golangci-lint ${GOLANGCI_LINT_VERSION:-} (go install, built from source)")
	[ -x "$tools/node_modules/.bin/buf" ] || missing+=("buf (npm)")
	[ -x "$tools/bin/protoc-gen-go" ] && [ -x "$tools/bin/protoc-gen-go-grpc" ] || missing+=("protoc-gen-go and protoc-gen-go-grpc (go install)")
	[ -x "${FLEETBENCH_PROMETHEUS:-/usr/bin/prometheus}" ] || missing+=("Debian's prometheus package (apt-get, root)")
	[ -x "${FLEETBENCH_CHROMIUM:-/usr/bin/chromium}" ] || missing+=("Debian's chromium package (apt-get, root)")
	for b in kube-apiserver kube-controller-manager kube-scheduler kubelet etcd kwok; do
		[ -x "$kube/bin/$b" ] || { missing+=("the Kubernetes control plane, built from source into $kube (the longest step)"); break; }
	done
	for p in $(sed -n 's/^NODE_PACKAGES=(\(.*\))$/\1/p' scripts/kube-env.sh); do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			{ missing+=("the real node's Debian packages: containerd, runc, CNI plugins (apt-get, root)"); break; }
	done
	((${#missing[@]})) || exit 0
	echo "== make test: first run on this machine; before the tests it installs and builds:"
	printf '==   - %s\n' "${missing[@]}"
	echo "== on a fresh 2-CPU machine all of it takes about 25 minutes; later runs reuse the caches."
	echo "== make check (lint and the unit tier) needs only the Go tools: docs/testing.md"
	;;
*)
	sed -n '2,9p' "$0" >&2
	exit 2
	;;
esac
