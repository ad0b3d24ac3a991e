#!/usr/bin/env bash
# Builds the benchmark bundle: the benchmark packages' test binaries (the
# scripted server and the fake agents are those binaries themselves, run as
# children) and a prebuilt benchtable into one folder, with run.sh, so that
# the benchmarks run on a bigger Linux machine without Go, the client and
# the server pinned to separate cores, and write the same results file as
# `make bench` (bench/results/*.json: copy it back into the repository and
# run `go run ./internal/benchresult/cmd/benchtable table`).
#
# Usage: scripts/bench-bundle.sh [DIR]   (default out/bench-bundle; GOOS and
# GOARCH cross-build it, e.g. GOARCH=arm64). It also writes DIR.tar.gz.
# Then, on the target: tar xzf bench-bundle.tar.gz && bench-bundle/run.sh
# [--quick] [SERVER_CPUS [CLIENT_CPUS]] (taskset lists; by default the
# first half of the cores serve, the second half run the client).
#
# Left out: the root package's LiveCost (it builds and runs the fleetbench
# command) and the micro benchmarks of packages without a hand-tuned path.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-out/bench-bundle}
rm -rf "$dir" && mkdir -p "$dir"
export CGO_ENABLED=0
for pkg in coordinator pkg/load pkg/sim pkg/client pkg/hdr; do
	go test -c -o "$dir/$(basename "$pkg").test" "./$pkg"
done
go build -o "$dir/benchtable" ./internal/benchresult/cmd/benchtable
commit=$(git rev-parse HEAD)
dirty=$([ -n "$(git status --porcelain --untracked-files=no)" ] && echo -dirty || true)
echo "$commit$dirty" >"$dir/COMMIT"

cat >"$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the benchmarks of `make bench` from this bundle (no Go needed) and
# writes results/<date>-<commit>-<host>.json. Usage:
#   run.sh [--quick] [SERVER_CPUS [CLIENT_CPUS]]
# SERVER_CPUS pin the scripted server (FLEETBENCH_BENCH_SERVER_CPUS),
# CLIENT_CPUS the benchmarks themselves (taskset -c); by default the first
# half of the cores serve and the second half run the client. --quick runs
# each benchmark small (a few minutes in all) to show the bundle works.
set -euo pipefail
cd "$(dirname "$0")"
quick=
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
n=$(nproc)
if [ "$n" -lt 2 ]; then
	echo "run.sh: $n core(s): the client and the server cannot have cores of their own" >&2
	exit 1
fi
half=$((n / 2))
server=${1:-0-$((half - 1))}
client=${2:-$half-$((n - 1))}
export FLEETBENCH_BENCH_SERVER_CPUS=$server
pin=(taskset -c "$client")
rm -rf parts && mkdir -p parts results
step=0
run() { # run BENCHMARK-BINARY ARGS...: one command of the run, its figures kept
	step=$((step + 1))
	./benchtable exec -part "parts/$(printf %02d $step).json" -- "${pin[@]}" "$@"
}
if [ -n "$quick" ]; then
	export FLEETBENCH_FLOOR_LEVELS=${FLEETBENCH_FLOOR_LEVELS:-1000} FLEETBENCH_FLOOR_RUNS=${FLEETBENCH_FLOOR_RUNS:-1} \
		FLEETBENCH_FLOOR_SECONDS=${FLEETBENCH_FLOOR_SECONDS:-3} FLEETBENCH_SIM_BENCH_STREAMS=${FLEETBENCH_SIM_BENCH_STREAMS:-500}
	micro=-test.benchtime=100x merge=20x closed=(env FLEETBENCH_BENCH_SESSIONS=200)
else
	micro= merge=500x closed=()
fi
run ./hdr.test -test.run='^$' -test.bench=. -test.benchmem $micro
run ./client.test -test.run='^$' -test.bench=. -test.benchmem $micro
run ./coordinator.test -test.run='^$' -test.bench=Merge100Agents -test.benchmem -test.benchtime=$merge
run ./coordinator.test -test.run='^$' -test.bench='MergeReport|ReportMetrics' -test.benchmem -test.benchtime=2000x
run "${closed[@]}" ./load.test -test.run='^$' -test.bench=ClosedLoop -test.benchmem -test.benchtime=1x -test.timeout=30m
run ./load.test -test.run='^$' -test.bench=FloorRatio -test.benchtime=1x -test.timeout=30m
run ./sim.test -test.run='^$' -test.bench=. -test.benchmem -test.benchtime=1x -test.timeout=30m
commit=$(cat COMMIT)
dirty=false
case $commit in *-dirty) commit=${commit%-dirty} dirty=true ;; esac
./benchtable record -commit "$commit" -dirty="$dirty" -out results parts/*.json
RUN
chmod +x "$dir/run.sh"
tar czf "$dir.tar.gz" -C "$(dirname "$dir")" "$(basename "$dir")"
echo "bench-bundle: $dir ($(du -sh "$dir" | cut -f1)), $dir.tar.gz"
