package coordinator

import (
	"maps"
	"testing"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// TestWindowFromPBCountersMaps reads an agent's finish reasons and worker
// headers off the wire into the window the coordinator merges.
func TestWindowFromPBCountersMaps(t *testing.T) {
	fr := map[string]int64{"stop": 85, "length": 15}
	wh := map[string]int64{"X-Fleetbench-Worker": 100}
	w, _, err := windowFromPB(&pb.Report{WindowId: 1, Counters: &pb.Counters{Requests: 100, FinishReasons: fr, WorkerHeaders: wh}}, hdr.Default)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(w.Counters.FinishReasons, fr) || !maps.Equal(w.Counters.WorkerHeaders, wh) {
		t.Errorf("window counters: finish reasons %v, worker headers %v", w.Counters.FinishReasons, w.Counters.WorkerHeaders)
	}
}
