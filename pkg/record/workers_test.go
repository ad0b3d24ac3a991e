package record

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

// TestWorkersCountedAndBounded: successful requests count per named
// worker with their prompt tokens (failed ones and unnamed ones do not);
// past MaxWorkers names, requests go to OtherWorker; Merge and Clone keep
// every count.
func TestWorkersCountedAndBounded(t *testing.T) {
	w := NewWindow(1, hdr.Default)
	add := func(worker string, class client.Class) {
		w.Add(&Sample{Window: 1, Turn: 1, Result: &client.Result{
			Start: time.Unix(1, 0), TTFT: time.Millisecond, E2E: 2 * time.Millisecond, OutputTokens: 2,
			PromptTokens: 100, Worker: worker, Class: class, UsageReported: true,
		}})
	}
	add("w0", client.ClassOK)
	add("w0", client.ClassOK)
	add("w1", client.ClassOK)
	add("w1", client.ClassHTTP5xx)
	add("", client.ClassOK)
	if got := w.Workers; len(got) != 2 || *got["w0"] != (WorkerStat{2, 200}) || *got["w1"] != (WorkerStat{1, 100}) {
		t.Fatalf("workers %v", got)
	}
	for i := range MaxWorkers + 10 {
		add(fmt.Sprintf("pod-%d", i), client.ClassOK)
	}
	if n, o := len(w.Workers), w.Workers[OtherWorker]; n != MaxWorkers+1 || o == nil || o.Requests != 12 {
		t.Fatalf("%d workers, other %+v: want %d named and 12 others", n, o, MaxWorkers)
	}
	c := w.Clone()
	m := NewWindow(2, hdr.Default)
	if err := m.Merge(c); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range m.Workers {
		total += s.Requests
	}
	if total != 3+MaxWorkers+10 || len(m.Workers) != MaxWorkers+1 {
		t.Errorf("after clone and merge: %d workers, %d requests", len(m.Workers), total)
	}
}
