package agent_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// TestClientBuilderBlockingReads checks that the agent's --blocking-reads
// reaches its client: the client says at start whether its streams go to
// the event loops.
func TestClientBuilderBlockingReads(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		var logs bytes.Buffer
		logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
		tgt, err := agent.ClientBuilder(logger, agent.ClientOptions{BlockingReads: blocking})(t.Context(), agent.Spec{
			Target: "http://target.test", Model: "m", Workload: workload.Default(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := tgt.Close(); err != nil {
			t.Error(err)
		}
		loops := !blocking && runtime.GOOS == "linux"
		if want := "event_loops=" + map[bool]string{false: "false", true: "true"}[loops]; !strings.Contains(logs.String(), want) {
			t.Errorf("BlockingReads %v: the client's log lacks %q:\n%s", blocking, want, logs.String())
		}
	}
}
