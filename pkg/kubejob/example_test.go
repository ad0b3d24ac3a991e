package kubejob_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// A coordinator sizes its fleet from the largest level, starts the Job,
// follows its events and deletes the Job when it exits.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := fake.NewClientset() // in a cluster: kubernetes.NewForConfig(rest.InClusterConfig())

	m, err := kubejob.NewManager(cs, kubejob.Config{
		Namespace:       "bench",
		RunID:           "a1b2c",
		Image:           "ghcr.io/fleetbench/fleetbench:v1",
		AgentCapacity:   64,
		MaxLevel:        256,
		CoordinatorAddr: "fleetbench-coordinator:7070",
		Token:           kubejob.SecretRef{Name: "fleetbench-agent-token", Key: "token"},
		Owner:           kubejob.OwnerFromEnv(),
	}, hclog.NewNullLogger())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	if err := m.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = m.Delete(ctx) }()
	fmt.Println(m.JobName(), m.Agents())
	// Then: for ev := range m.Events() { if ev.Kind.Lost() { ... }; if ev.Fatal { return m.Err() } }

	// Output: fleetbench-agents-a1b2c 4
}
