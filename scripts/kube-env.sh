#!/usr/bin/env bash
# kube-env.sh builds and runs a real Kubernetes control plane on loopback for
# fleetbench's Kubernetes tests: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (fake nodes whose pods run and complete). Everything
# is built from the Go module proxy at pinned versions and cached outside the
# repository. With FLEETBENCH_KUBE_REAL_NODE=1 it adds one real node: a kubelet
# built the same way, running pods through containerd and runc from Debian's
# packages (root only). See docs/kube-env.md.
#
#   scripts/kube-env.sh build   build the binaries into the cache (once)
#   scripts/kube-env.sh start   build if needed, start everything, wait until ready
#   scripts/kube-env.sh env     print `export FLEETBENCH_KUBECONFIG=... KUBECONFIG=...`
#   scripts/kube-env.sh status  say whether the environment runs
#   scripts/kube-env.sh stop    stop everything and remove the state directory
#   scripts/kube-env.sh install-node   install the real node's Debian packages
#   scripts/kube-env.sh load-image DIR NAME   import an OCI image layout (or
#                               its tar) into the real node's containerd as NAME
#
# Environment:
#   FLEETBENCH_KUBE_CACHE  binary cache (default ~/.cache/fleetbench/kube-v1.34.4)
#   FLEETBENCH_KUBE_DIR    state: certs, kubeconfigs, etcd data, logs, pids
#                          (default ${TMPDIR:-/tmp}/fleetbench-kube-$UID)
#   FLEETBENCH_KUBE_NODES  number of fake nodes (default 3)
#   FLEETBENCH_KUBE_REAL_NODE  1: also run the real node fleetbench-node
set -euo pipefail

KUBE_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/scripts/kube-env
CACHE=${FLEETBENCH_KUBE_CACHE:-$HOME/.cache/fleetbench/kube-$KUBE_VERSION}
DIR=${FLEETBENCH_KUBE_DIR:-${TMPDIR:-/tmp}/fleetbench-kube-$(id -u)}
NODES=${FLEETBENCH_KUBE_NODES:-3}
REAL_NODE=${FLEETBENCH_KUBE_REAL_NODE:-0}
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
		kubelet=k8s.io/kubernetes/cmd/kubelet \
		helper=fleetbench.local/kube-env/kube/helper \
		pause=fleetbench.local/kube-env/kube/pause
	build_one etcd "-s -w" etcd=fleetbench.local/kube-env/etcd
	build_one kwok "-s -w" \
		kwok=sigs.k8s.io/kwok/cmd/kwok
	exec 9>&-
	if ((SECONDS - start > 1)); then
		log "build took $((SECONDS - start))s; binaries in $CACHE/bin"
	fi
}

# --- the real node ---------------------------------------------------------

cmd_install_node() {
	local missing=() p
	for p in "${NODE_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	((EUID == 0)) || die "installing ${missing[*]} needs root"
	log "installing ${missing[*]} from Debian's packages"
	# policy-rc.d 101: the packages must not start a system containerd.
	local rc=/usr/sbin/policy-rc.d had=0
	[[ -e $rc ]] && had=1
	((had)) || printf '#!/bin/sh\nexit 101\n' >"$rc" && chmod +x "$rc"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
		apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
			{ ((had)) || rm -f "$rc"; die "apt-get install ${missing[*]} failed"; }
	fi
	((had)) || rm -f "$rc"
}

# check_node says what the real node lacks, in one line, before anything
# starts.
check_node() {
	((EUID == 0)) || die "the real node needs root (kubelet and containerd); unset FLEETBENCH_KUBE_REAL_NODE or run as root"
	local b
	for b in "$CONTAINERD" "$CTR" /usr/sbin/runc "$CNI_BIN/bridge"; do
		[[ -x $b ]] || die "the real node needs $b: run scripts/kube-env.sh install-node"
	done
	[[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || die "the real node needs cgroups at /sys/fs/cgroup"
	# One real node per machine: the kubelet owns /kubepods and a few host
	# paths.
	local other
	other=$(cat "$NODE_OWNER" 2>/dev/null || true)
	if [[ -n $other && $other != "$DIR" && -f $other/real-node ]]; then
		die "a real node already runs from $other: stop it with FLEETBENCH_KUBE_DIR=$other $0 stop"
	fi
}

start_node() {
	check_node
	local helper=$CACHE/bin/helper node=$DIR/node
	mkdir -p "$node"/{containerd,cni,kubelet,kubelet-certs,pod-logs,runc}
	touch "$DIR/real-node"
	echo "$DIR" >"$NODE_OWNER"
	local s
	for s in "${NODE_SYSCTLS[@]}"; do
		echo "$s=$(sysctl -n "$s")"
	done >"$node/sysctls"
	# Host paths the kubelet writes whatever its --root-dir: those that do
	# not exist yet are removed at stop.
	local d
	for d in "${NODE_HOST_DIRS[@]}"; do
		[[ -e $d ]] || echo "$d"
	done >"$node/host-dirs"
	local kports
	mapfile -t kports < <("$helper" ports 2)
	local kubelet_port=${kports[0]} healthz_port=${kports[1]}
	local sock=$node/containerd/containerd.sock

	# Only hostNetwork pods run here, but the runtime reports NetworkReady
	# only with a CNI config: a bridge of its own, never the host's.
	cat >"$node/cni/10-fleetbench.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "fleetbench",
 "plugins": [
  {"type": "bridge", "bridge": "fbkube0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.77.0/24"}]],
            "dataDir": "$node/cni/ipam"}},
  {"type": "loopback"}]}
CNI
	# restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and runc
	# fails every sandbox trying to lower its oom_score_adj.
	cat >"$node/containerd.toml" <<TOML
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:fleetbench"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$node/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$node/cni"
TOML
	ip addr replace "$NODE_IP/32" dev lo || die_start "add $NODE_IP to lo"
	launch containerd --config "$node/containerd.toml" --log-level warn
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -S $sock ]] && "$CTR" --address "$sock" version >/dev/null 2>&1 && break
		sleep 0.1
	done
	"$CTR" --address "$sock" version >/dev/null 2>&1 || die_start "containerd did not start"

	"$helper" oci-image -binary "$CACHE/bin/pause" -name registry.k8s.io/pause:fleetbench -out "$node/pause.tar"
	"$CTR" --address "$sock" -n k8s.io images import "$node/pause.tar" >/dev/null ||
		die_start "import the pause image into containerd"

	# Settings from docs/kube-env.md: cgroup v1 allowed, no swap check, the
	# private containerd, anonymous read on loopback, no host iptables
	# chains, logs and state under $DIR, eviction only when truly out.
	cat >"$node/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $kubelet_port
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
readOnlyPort: 0
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$sock
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
makeIPTablesUtilChains: false
podLogsDir: $node/pod-logs
registerWithTaints:
  - {key: $NODE_TAINT, value: "true", effect: NoSchedule}
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
resolvConf: /etc/resolv.conf
maxPods: 30
YAML
	launch kubelet \
		--config="$node/kubelet.yaml" \
		--kubeconfig="$DIR/kubelet.kubeconfig" \
		--root-dir="$node/kubelet" --cert-dir="$node/kubelet-certs" \
		--hostname-override=fleetbench-node --node-ip="$NODE_IP" \
		--node-labels="$NODE_TAINT=true,type=real"
	if ! "$helper" node-ready -kubeconfig "$DIR/admin.kubeconfig" -timeout 2m; then
		die_start "the real node did not become Ready"
	fi
}

# node_mounts prints the mount points under the node's directories, deepest
# first.
node_mounts() {
	awk -v d="$DIR/node" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# stop_node stops the real node and undoes what it did to the host: pod
# processes and their shims, containerd's and the kubelet's mounts, the
# /kubepods cgroups, the bridge, the sysctls.
stop_node() {
	[[ -f $DIR/real-node ]] || return 0
	local pid d
	if pid=$(pid_of kubelet); then
		kill -TERM "$pid" 2>/dev/null || true
		wait_gone "$pid"
	fi
	# Containers outlive containerd (their shims hold them): kill every
	# process in the pods' cgroups, then the shims of this containerd.
	local cg procs
	for cg in /sys/fs/cgroup/*/kubepods; do
		[[ -d $cg ]] || continue
		procs=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
		[[ -n $procs ]] && kill -KILL $procs 2>/dev/null || true
	done
	local sock=$DIR/node/containerd/containerd.sock
	pkill -KILL -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true
	if pid=$(pid_of containerd); then
		kill -TERM "$pid" 2>/dev/null || true
		wait_gone "$pid"
	fi
	local m
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(node_mounts)
	# Remove the pods' cgroups, deepest first, in every hierarchy.
	for cg in /sys/fs/cgroup/*/kubepods; do
		[[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	ip link del fbkube0 2>/dev/null || true
	ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
	# The kubelet's links to this node's pod logs, its device-plugin
	# socket, and the host directories it created.
	find /var/log/containers -maxdepth 1 -type l -lname "$DIR/node/*" -delete 2>/dev/null || true
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock
	if [[ -f $DIR/node/host-dirs ]]; then
		while read -r d; do
			[[ -n $d ]] && rm -rf "$d"
		done <"$DIR/node/host-dirs"
	fi
	if [[ -f $DIR/node/sysctls ]]; then
		local kv
		while read -r kv; do
			sysctl -qw "$kv" >/dev/null 2>&1 || true
		done <"$DIR/node/sysctls"
	fi
	rm -f "$DIR/real-node"
	[[ "$(cat "$NODE_OWNER" 2>/dev/null)" == "$DIR" ]] && rm -f "$NODE_OWNER"
	return 0
}

# wait_gone PID waits up to 15s for PID to exit, then kills it.
wait_gone() {
	local deadline=$((SECONDS + 15))
	while kill -0 "$1" 2>/dev/null && ((SECONDS < deadline)); do
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
}

cmd_load_image() {
	(($# == 2)) || die "usage: $0 load-image LAYOUT_DIR|ARCHIVE NAME (an OCI image layout, e.g. out/image from make image)"
	[[ -f $DIR/real-node ]] || die "no real node runs in $DIR: start it with FLEETBENCH_KUBE_REAL_NODE=1 $0 start"
	local src=$1 name=$2 archive=$1 sock=$DIR/node/containerd/containerd.sock
	if [[ -d $src ]]; then
		[[ -f $src/index.json ]] || die "$src is not an OCI image layout (no index.json): run make image"
		archive=$(mktemp "$DIR/image.XXXXXX.tar")
		tar -C "$src" -cf "$archive" .
	fi
	[[ -f $archive ]] || die "$src: no such file or directory"
	"$CTR" --address "$sock" -n k8s.io images import --index-name "$name" "$archive" >&2 ||
		die "import $src into the real node's containerd"
	[[ $archive == "$src" ]] || rm -f "$archive"
	log "loaded $name into the real node"
}

# --- running the control plane -------------------------------------------

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# The real node's components, started after the control plane.
NODE_COMPONENTS=(containerd kubelet)
MARKER=.fleetbench-kube-env

# The real node's Debian packages and the binaries they give.
NODE_PACKAGES=(containerd runc containernetworking-plugins iproute2)
CONTAINERD=/usr/bin/containerd
CTR=/usr/bin/ctr
CNI_BIN=/usr/lib/cni
# The node's taint and label: only pods that ask for the real node land on
# it; the kwok tests keep their fake nodes.
NODE_TAINT=fleetbench.dev/real-node
# The kubelet changes these sysctls with no option to leave them alone; stop
# puts them back.
NODE_SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory)
# NODE_IP is the node's address, on lo: the kubelet refuses a loopback node
# IP, and the apiserver dials the kubelet there (logs, exec, port-forward).
# An address on lo is reachable from this machine only.
NODE_IP=10.88.76.1
# NODE_HOST_DIRS are written by the kubelet outside its root directory.
NODE_HOST_DIRS=(/var/lib/kubelet /var/log/containers)
# NODE_OWNER names the state directory of the machine's one real node.
NODE_OWNER=/run/fleetbench-kube-real-node

# binary_of NAME prints the path a component runs from.
binary_of() {
	case $1 in
	containerd) echo "$CONTAINERD" ;;
	*) echo "$CACHE/bin/$1" ;;
	esac
}

# components prints the components this environment runs, in start order.
components() {
	local c
	for c in "${COMPONENTS[@]}"; do echo "$c"; done
	if [[ $REAL_NODE == 1 || -f $DIR/real-node ]]; then
		for c in "${NODE_COMPONENTS[@]}"; do echo "$c"; done
	fi
}

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
	[[ $cmd == "$(binary_of "$1") "* ]] || return 1
	echo "$pid"
}

running() {
	local c
	while read -r c; do
		pid_of "$c" >/dev/null || return 1
	done < <(components)
	[[ -f $DIR/ready ]]
}

# launch NAME ARGS... starts a component in its own session (so a ^C meant for
# a test does not reach it), detached from the caller, logging to $DIR/NAME.log.
launch() {
	local name=$1
	shift
	setsid "$(binary_of "$name")" "$@" >"$DIR/$name.log" 2>&1 </dev/null &
	echo $! >"$DIR/$name.pid"
}

# die_start MESSAGE reports a failed start with the tail of every log.
die_start() {
	local c
	while read -r c; do
		if [[ -s $DIR/$c.log ]]; then
			log "--- last lines of $DIR/$c.log"
			tail -n 15 "$DIR/$c.log" >&2
		fi
	done < <(components)
	stop_node
	kill_all
	die "$* (logs kept in $DIR; \`$0 stop\` removes them)"
}

print_env() {
	echo "export FLEETBENCH_KUBECONFIG=$DIR/admin.kubeconfig"
	echo "export KUBECONFIG=$DIR/admin.kubeconfig"
}

cmd_start() {
	cmd_build
	if [[ $REAL_NODE == 1 ]]; then
		check_node
	fi
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
		--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$pki/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP,Hostname \
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
	local what="$NODES kwok nodes"
	if [[ $REAL_NODE == 1 ]]; then
		start_node
		what+=" and the real node fleetbench-node"
	fi
	local c
	while read -r c; do
		pid_of "$c" >/dev/null || die_start "$c exited during start"
	done < <(components)
	touch "$DIR/ready"
	print_env >"$DIR/env"
	log "ready in $((SECONDS - start))s: apiserver $server, $what, logs in $DIR"
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
	stop_node
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
install-node) cmd_install_node ;;
load-image)
	shift
	cmd_load_image "$@"
	;;
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
status) cmd_status ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
	;;
esac
