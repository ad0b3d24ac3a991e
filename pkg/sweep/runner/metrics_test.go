package runner

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetLevel(40)
	m.PointDone()
	m.PointDone()
	const want = `
# HELP fleetbench_sweep_level Concurrency level of the sweep point being measured (0 between levels).
# TYPE fleetbench_sweep_level gauge
fleetbench_sweep_level 40
# HELP fleetbench_sweep_points_done_total Sweep points measured by this process (a resumed sweep's earlier points excluded).
# TYPE fleetbench_sweep_points_done_total counter
fleetbench_sweep_points_done_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering a second sweep's metrics in the same registry succeeded, want an error")
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
