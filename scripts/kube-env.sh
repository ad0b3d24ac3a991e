#!/usr/bin/env bash
# kube-env.sh builds and runs a real Kubernetes control plane on loopback for
# fleetbench's Kubernetes tests: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (fake nodes whose pods run and complete). Everything
# is built from the Go module proxy at pinned versions and cached outside the
# repository. See docs/kube-env.md.
#
#   scripts/kube-env.sh build   build the binaries into the cache (once)
#   scripts/kube-env.sh start   build if needed, start everything, wait until ready
#   scripts/kube-env.sh env     print `export FLEETBENCH_KUBECONFIG=... KUBECONFIG=...`
#   scripts/kube-env.sh status  say whether the environment runs
#   scripts/kube-env.sh stop    stop everything and remove the state directory
#
# Environment:
#   FLEETBENCH_KUBE_CACHE  binary cache (default ~/.cache/fleetbench/kube-v1.34.4)
#   FLEETBENCH_KUBE_DIR    state: certs, kubeconfigs, etcd data, logs, pids
#                          (default ${TMPDIR:-/tmp}/fleetbench-kube-$UID)
#   FLEETBENCH_KUBE_NODES  number of fake nodes (default 3)
set -euo pipefail

KUBE_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/scripts/kube-env
CACHE=${FLEETBENCH_KUBE_CACHE:-$HOME/.cache/fleetbench/kube-$KUBE_VERSION}
DIR=${FLEETBENCH_KUBE_DIR:-${TMPDIR:-/tmp}/fleetbench-kube-$(id -u)}
NODES=${FLEETBENCH_KUBE_NODES:-3}
GO=${GO:-go}

# The build modules pin every version in their go.mod and go.sum; never let
# the go command pick another toolchain or a vendor directory.
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

log() { printf 'kube-env: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# stamp NAME MODULE_DIR LDFLAGS prints the key that says a cached binary is
# current: the toolchain, the build module's pins and sources, and the flags.
stamp() {
	local name=$1 mod=$2 ldflags=$3
	{
		echo "$name"
		"$GO" version
		echo "$ldflags"
		(cd "$SRC/$mod" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | LC_ALL=C sort | xargs sha256sum)
	} | sha256sum | cut -d' ' -f1
}

# build_one MODULE_DIR LDFLAGS NAME=PACKAGE... builds the named packages of one
# build module into $CACHE/bin, skipping those whose stamp is current.
build_one() {
	local mod=$1 ldflags=$2
	shift 2
	local todo=() names=() spec name pkg key
	for spec in "$@"; do
		name=${spec%%=*} pkg=${spec#*=}
		key=$(stamp "$name" "$mod" "$ldflags")
		if [[ -x $CACHE/bin/$name && "$(cat "$CACHE/bin/$name.stamp" 2>/dev/null)" == "$key" ]]; then
			continue
		fi
		todo+=("$pkg") names+=("$name")
	done
	((${#todo[@]})) || return 0
	log "building ${names[*]} (module scripts/kube-env/$mod)"
	local tmp
	tmp=$(mktemp -d "$CACHE/.build.XXXXXX")
	# nice: leave the CPU to whoever else uses this machine.
	(cd "$SRC/$mod" && nice -n 10 "$GO" build -trimpath -ldflags "$ldflags" -o "$tmp/" "${todo[@]}")
	for name in "${names[@]}"; do
		# go build names a binary after its package's last path element.
		mv -f "$tmp/$name" "$CACHE/bin/$name"
		stamp "$name" "$mod" "$ldflags" >"$CACHE/bin/$name.stamp"
	done
	rm -rf "$tmp"
}

# check_pins fails when the versions above and the build modules disagree:
# the go.mod files decide what is built, these names only document it.
check_pins() {
	local mod=$1 path=$2 version=$3
	grep -Eq "^(require )?[[:space:]]*$path $version( |$)" "$SRC/$mod/go.mod" ||
		die "scripts/kube-env/$mod/go.mod does not require $path $version"
}

cmd_build() {
	check_pins kube k8s.io/kubernetes "$KUBE_VERSION"
	check_pins etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
	check_pins kwok sigs.k8s.io/kwok "$KWOK_VERSION"
	mkdir -p "$CACHE/bin"
	# One build at a time per cache, so a parallel `make test` waits instead
	# of compiling the same thing twice.
	exec 9>"$CACHE/.lock"
	flock 9
	local start=$SECONDS
	local kv=k8s.io/component-base/version cv=k8s.io/client-go/pkg/version
	local kube_ld="-s -w" v major minor
	IFS=. read -r major minor _ <<<"${KUBE_VERSION#v}"
	# The version stamp the upstream build (hack/lib/version.sh) sets.
	for v in $kv $cv; do
		kube_ld+=" -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	done
	build_one kube "$kube_ld" \
		kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
		kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
		kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
		helper=fleetbench.local/kube-env/kube/helper
	build_one etcd "-s -w" etcd=fleetbench.local/kube-env/etcd
	build_one kwok "-s -w" \
		kwok=sigs.k8s.io/kwok/cmd/kwok
	exec 9>&-
	if ((SECONDS - start > 1)); then
		log "build took $((SECONDS - start))s; binaries in $CACHE/bin"
	fi
}

# --- running the control plane -------------------------------------------

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
MARKER=.fleetbench-kube-env

# pid_of NAME prints the pid of a component this environment started, if it
# still runs. The command line is checked so a reused pid is never taken for
# ours.
pid_of() {
	local f=$DIR/$1.pid pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
	local cmd
	cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
	[[ $cmd == "$CACHE/bin/$1 "* ]] || return 1
	echo "$pid"
}

running() {
	local c
	for c in "${COMPONENTS[@]}"; do
		pid_of "$c" >/dev/null || return 1
	done
	[[ -f $DIR/ready ]]
}

# launch NAME ARGS... starts a component in its own session (so a ^C meant for
# a test does not reach it), detached from the caller, logging to $DIR/NAME.log.
launch() {
	local name=$1
	shift
	setsid "$CACHE/bin/$name" "$@" >"$DIR/$name.log" 2>&1 </dev/null &
	echo $! >"$DIR/$name.pid"
}

# die_start MESSAGE reports a failed start with the tail of every log.
die_start() {
	local c
	for c in "${COMPONENTS[@]}"; do
		if [[ -s $DIR/$c.log ]]; then
			log "--- last lines of $DIR/$c.log"
			tail -n 15 "$DIR/$c.log" >&2
		fi
	done
	kill_all
	die "$* (logs kept in $DIR; \`$0 stop\` removes them)"
}

print_env() {
	echo "export FLEETBENCH_KUBECONFIG=$DIR/admin.kubeconfig"
	echo "export KUBECONFIG=$DIR/admin.kubeconfig"
}

cmd_start() {
	cmd_build
	if running; then
		log "already running in $DIR"
		print_env
		return 0
	fi
	cmd_stop # leftovers of a start that died half way
	if [[ -d $DIR && -n "$(ls -A "$DIR")" && ! -f $DIR/$MARKER ]]; then
		die "$DIR exists and is not a kube-env directory; set FLEETBENCH_KUBE_DIR"
	fi
	mkdir -p "$DIR"
	chmod 700 "$DIR"
	touch "$DIR/$MARKER"
	local start=$SECONDS helper=$CACHE/bin/helper
	local ports
	mapfile -t ports < <("$helper" ports 4)
	((${#ports[@]} == 4)) || die "pick free ports"
	local etcd_port=${ports[0]} peer_port=${ports[1]} api_port=${ports[2]} kwok_port=${ports[3]}
	local server=https://127.0.0.1:$api_port pki=$DIR/pki
	"$helper" init -dir "$DIR" -server "$server"

	# A throwaway etcd: no fsync, it holds nothing a test cannot recreate.
	launch etcd \
		--name=fleetbench --data-dir="$DIR/etcd" \
		--listen-client-urls="http://127.0.0.1:$etcd_port" \
		--advertise-client-urls="http://127.0.0.1:$etcd_port" \
		--listen-peer-urls="http://127.0.0.1:$peer_port" \
		--initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
		--initial-cluster="fleetbench=http://127.0.0.1:$peer_port" \
		--unsafe-no-fsync --log-level=warn

	# The endpoint reconciler is off: Endpoints may not hold a loopback
	# address, and nothing here reaches the apiserver through its Service.
	launch kube-apiserver \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
		--client-ca-file="$pki/ca.crt" \
		--authorization-mode=Node,RBAC \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$pki/sa.pub" \
		--service-account-signing-key-file="$pki/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 \
		--endpoint-reconciler-type=none \
		--allow-privileged=true --profiling=false

	# Every controller (Job, ServiceAccount token, garbage collector, ...), each
	# with its own ServiceAccount so RBAC is exercised as in a real cluster.
	# --secure-port=0: no metrics/healthz server, so no port and no authn setup.
	launch kube-controller-manager \
		--kubeconfig="$DIR/controller-manager.kubeconfig" \
		--controllers='*' --use-service-account-credentials=true \
		--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
		--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
		--leader-elect=false --secure-port=0

	launch kube-scheduler \
		--kubeconfig="$DIR/scheduler.kubeconfig" \
		--leader-elect=false --secure-port=0

	# kwok plays the kubelet of every node annotated kwok.x-k8s.io/node=fake;
	# the stages in scripts/kube-env/kwok/stages.yaml drive the pods.
	launch kwok \
		--kubeconfig="$DIR/kwok.kubeconfig" \
		--config="$SRC/kwok/stages.yaml" \
		--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--node-lease-duration-seconds=40 \
		--cidr=10.244.0.1/16 --node-ip=10.243.0.1 \
		--server-address="127.0.0.1:$kwok_port"

	if ! "$helper" bootstrap -kubeconfig "$DIR/admin.kubeconfig" -nodes "$NODES" -timeout 3m; then
		die_start "the control plane did not become ready"
	fi
	local c
	for c in "${COMPONENTS[@]}"; do
		pid_of "$c" >/dev/null || die_start "$c exited during start"
	done
	touch "$DIR/ready"
	print_env >"$DIR/env"
	log "ready in $((SECONDS - start))s: apiserver $server, $NODES kwok nodes, logs in $DIR"
	print_env
}

# kill_all stops every component this environment started: TERM, then KILL
# after 15s.
kill_all() {
	local c i pid pids=()
	# Reverse start order: kwok and the controllers go before the apiserver.
	for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
		c=${COMPONENTS[i]}
		if pid=$(pid_of "$c"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
	done
	local deadline=$((SECONDS + 15))
	for pid in "${pids[@]}"; do
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
}

cmd_stop() {
	kill_all
	# Only a directory this script made is removed, never a mistyped path.
	if [[ -f $DIR/$MARKER ]]; then
		rm -rf "$DIR"
	fi
}

cmd_env() {
	running || die "not running; run: $0 start"
	print_env
}

cmd_status() {
	if running; then
		echo "running in $DIR"
		print_env
	else
		echo "not running"
		return 1
	fi
}

case "${1:-}" in
build) cmd_build ;;
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
status) cmd_status ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
	;;
esac
