package agent

import (
	"maps"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestReportCarriesFinishReasonsAndWorkerHeaders puts a window's finish
// reasons and worker headers on the wire, where the coordinator's merge
// reads them (coordinator.TestWindowFromPBCountersMaps).
func TestReportCarriesFinishReasonsAndWorkerHeaders(t *testing.T) {
	w := record.NewWindow(1, hdr.Default)
	w.Counters.FinishReasons = map[string]int64{"stop": 85, "length": 15}
	w.Counters.WorkerHeaders = map[string]int64{"X-Fleetbench-Worker": 100}
	c := reportToPB(1, w).GetCounters()
	if !maps.Equal(c.GetFinishReasons(), w.Counters.FinishReasons) || !maps.Equal(c.GetWorkerHeaders(), w.Counters.WorkerHeaders) {
		t.Errorf("report counters: finish reasons %v, worker headers %v", c.GetFinishReasons(), c.GetWorkerHeaders())
	}
}
