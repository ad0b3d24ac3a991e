#!/usr/bin/env bash
# Enforces the architecture's import boundaries (docs/design.md):
#  - coordinator/ and agent/ never import each other;
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
for p in client record load workload result hdr sse; do
	check ./pkg/sim/... "pkg/$p" "the simulator stands apart from the measurement code"
done

# Generated code stops at the gRPC edge: only files named *grpc*.go, *server*.go,
# *conn*.go or *convert*.go in coordinator/ and agent/ may import it.
gen="$mod/gen/"
while IFS= read -r f; do
	case "$(basename "$f")" in
	*grpc*.go | *server*.go | *conn*.go | *convert*.go | *_test.go) ;;
	*) echo "import boundary: $f imports generated protobuf code; convert at the edge"; fail=1 ;;
	esac
done < <(grep -l "\"$gen" $(git ls-files 'coordinator/*.go' 'agent/*.go' 'pkg/*.go' 2>/dev/null; ls coordinator/*.go agent/*.go 2>/dev/null) 2>/dev/null | sort -u)

exit $fail
