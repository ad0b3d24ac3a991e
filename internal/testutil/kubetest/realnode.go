package kubetest

import (
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

const (
	// EnvImage names the variable holding the fleetbench image loaded into
	// the real node (`make e2e` and `make test` set it after
	// `scripts/kube-env.sh load-image`).
	EnvImage = "FLEETBENCH_E2E_IMAGE"
	// EnvRequireRealNode, set to "1", turns a missing real node or image
	// into a test failure instead of a skip.
	EnvRequireRealNode = "FLEETBENCH_REQUIRE_REAL_NODE"

	// RealNodeName is the node scripts/kube-env.sh registers with
	// FLEETBENCH_KUBE_REAL_NODE=1; RealNodeLabel is its label and taint
	// key (value "true", effect NoSchedule), so only pods that ask for it
	// run there.
	RealNodeName  = "fleetbench-node"
	RealNodeLabel = "fleetbench.dev/real-node"
)

// RealNode is the test environment's real node: a kubelet running pods
// through containerd.
type RealNode struct {
	// Name is the node's name; IP its InternalIP, an address on this
	// machine's lo that host-network pods can listen on and that the API
	// server reaches (pod proxy, logs).
	Name, IP string
	// Image is the fleetbench image loaded into the node's containerd.
	Image string
}

// Toleration tolerates the node's taint.
func (RealNode) Toleration() corev1.Toleration {
	return corev1.Toleration{Key: RealNodeLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// Selector selects the node.
func (RealNode) Selector() map[string]string { return map[string]string{RealNodeLabel: "true"} }

// Real returns the environment's config and its real node. It skips the
// test when there is no environment, no real node or no image, unless
// FLEETBENCH_REQUIRE_REAL_NODE=1 (then it fails), and fails when the node
// is not Ready within a minute.
func Real(t testing.TB) (*rest.Config, RealNode) {
	t.Helper()
	required := os.Getenv(EnvRequireRealNode) == "1"
	miss := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + "; run `make e2e`"
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var cfg *rest.Config
	if required {
		cfg = Require(t)
	} else {
		cfg = Env(t)
	}
	image := os.Getenv(EnvImage)
	if image == "" {
		miss("no fleetbench image in a real node: %s is not set", EnvImage)
	}
	cs := Client(t, cfg)
	node, err := cs.CoreV1().Nodes().Get(t.Context(), RealNodeName, metav1.GetOptions{})
	if err != nil {
		miss("no real node %s: %v (start the environment with FLEETBENCH_KUBE_REAL_NODE=1)", RealNodeName, err)
	}
	for deadline := time.Now().Add(time.Minute); !nodeReady(node); {
		if time.Now().After(deadline) {
			t.Fatalf("real node %s not Ready after a minute: %+v", RealNodeName, node.Status.Conditions)
		}
		time.Sleep(500 * time.Millisecond)
		if node, err = cs.CoreV1().Nodes().Get(t.Context(), RealNodeName, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rn := RealNode{Name: node.Name, Image: image}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			rn.IP = a.Address
		}
	}
	if rn.IP == "" {
		t.Fatalf("real node %s has no InternalIP", RealNodeName)
	}
	return cfg, rn
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
