#!/usr/bin/env bash
# Enforces the architecture's import boundaries (docs/design.md):
#  - coordinator/ and agent/ never import each other;
#  - fleet/ alone wires a coordinator to agents (imports both), and
#    nothing below it (coordinator/, agent/, pkg/) imports it;
#  - the simulator never imports the measurement side, so agents cannot know
#    they talk to it and it cannot cheat by sharing state with them;
#  - generated protobuf packages are imported only at the gRPC edge.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0

deps() { go list -deps "$1" 2>/dev/null | grep "^$mod/" || true; }

check() { # check PKG FORBIDDEN_PREFIX REASON
	local pkg=$1 forbidden=$2 reason=$3
	go list "$pkg" >/dev/null 2>&1 || return 0
	if deps "$pkg" | grep -q "^$mod/$forbidden"; then
		echo "import boundary: $pkg must not import $forbidden ($reason)"
		fail=1
	fi
}

check ./coordinator/... agent "coordinator and agent are independent"
check ./agent/... coordinator "coordinator and agent are independent"
check ./coordinator/... fleet "fleet is built on the coordinator, not the other way round"
check ./agent/... fleet "fleet is built on the agent, not the other way round"
for p in $(go list ./pkg/... ./internal/...); do
	check "$p" fleet "pkg/ and internal/ packages stand below fleet"
done

# fleet/ is the one package that wires a coordinator to agents: no other
# package imports both directly. Package main is the exception the
# command line needs, file by file: cmd_agent.go runs the agent command
# (and imports no coordinator), and the coordinator's own flags bind to
# coordinator.Config in cmd_coordinator*.go and cmd_sweep.go; no file of
# main imports both, and only cmd_agent.go imports agent.
imports() { go list -f '{{join .Imports "\n"}}' "$1" 2>/dev/null || true; }
for p in $(go list ./... | grep -v "^$mod/fleet$"); do
	[ "$p" = "$mod" ] && continue
	if imports "$p" | grep -qx "$mod/coordinator" && imports "$p" | grep -qx "$mod/agent"; then
		echo "import boundary: $p imports both coordinator and agent; only fleet wires them together"
		fail=1
	fi
done
for f in *.go; do
	case "$f" in *_test.go) continue ;; esac
	has_agent=$(grep -c "\"$mod/agent\"" "$f" || true)
	has_coord=$(grep -c "\"$mod/coordinator\"" "$f" || true)
	if [ "$has_agent" != 0 ] && [ "$f" != cmd_agent.go ]; then
		echo "import boundary: $f imports agent; in package main only cmd_agent.go may (run agents through fleet)"
		fail=1
	fi
	if [ "$has_agent" != 0 ] && [ "$has_coord" != 0 ]; then
		echo "import boundary: $f imports both coordinator and agent; only fleet wires them together"
		fail=1
	fi
done
for p in client record load workload result hdr sse; do
	check ./pkg/sim/... "pkg/$p" "the simulator stands apart from the measurement code"
done

# The same boundaries for tests, in every tier (their build tags), plus:
# internal/testutil/* is imported from _test.go files only. One exception:
# coordinator's external test package (coordinator_test, files declaring
# package coordinator_test) runs real agents over loopback gRPC against a
# coordinator, which is what those tests check; the coordinator package
# and its in-package tests never import agent.
tags="integration e2e soak"
while IFS='|' read -r p imports timports ximports; do
	for i in $timports $ximports; do
		case $p in "$mod"/agent | "$mod"/agent/*)
			[[ $i == "$mod"/coordinator || $i == "$mod"/coordinator/* ]] &&
				{ echo "import boundary: $p's tests import $i (coordinator and agent are independent)"; fail=1; } ;;
		esac
		case $p in "$mod"/pkg/* | "$mod"/internal/*)
			[[ $i == "$mod"/fleet || $i == "$mod"/fleet/* ]] &&
				{ echo "import boundary: $p's tests import $i (pkg/ and internal/ stand below fleet)"; fail=1; } ;;
		esac
		case $p in "$mod"/pkg/sim | "$mod"/pkg/sim/*)
			[[ $i =~ ^$mod/pkg/(client|record|load|workload|result|hdr|sse)(/|$) ]] &&
				{ echo "import boundary: $p's tests import $i (the simulator stands apart from the measurement code)"; fail=1; } ;;
		esac
	done
	for i in $timports; do
		case $p in "$mod"/coordinator | "$mod"/coordinator/*)
			[[ $i == "$mod"/agent || $i == "$mod"/agent/* ]] &&
				{ echo "import boundary: $p's in-package tests import $i (only coordinator_test may run real agents)"; fail=1; } ;;
		esac
	done
	for i in $imports; do
		[[ $i == "$mod"/internal/testutil/* && $p != "$mod"/internal/testutil/* ]] &&
			{ echo "import boundary: $p imports $i outside its _test.go files (test helpers stay in tests)"; fail=1; }
	done
done < <(go list -tags "$tags" -f '{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}}|{{join .XTestImports " "}}' ./...)

# Generated code stops at the gRPC edge: only files named *grpc*.go, *server*.go,
# *conn*.go or *convert*.go in coordinator/, agent/ and internal/wire (the workload's
# one wire conversion) may import it; fleet/, pkg/ and package main never do.
gen="$mod/gen/"
while IFS= read -r f; do
	case "$(basename "$f")" in
	*grpc*.go | *server*.go | *conn*.go | *convert*.go | *_test.go) ;;
	*) echo "import boundary: $f imports generated protobuf code; convert at the edge"; fail=1 ;;
	esac
done < <(grep -l "\"$gen" $(git ls-files 'coordinator/*.go' 'agent/*.go' 'fleet/*.go' 'pkg/*.go' 'internal/*.go' '*.go' 2>/dev/null; ls coordinator/*.go agent/*.go fleet/*.go pkg/*/*.go internal/*/*.go ./*.go 2>/dev/null) 2>/dev/null | sort -u | grep -v -e '^gen/' -e '^internal/wire/')

exit $fail
