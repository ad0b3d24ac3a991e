package coordinator

import (
	"context"
	"testing"
	"time"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestLastReportsAfterStop: an agent whose turns outlast the grace (an
// overloaded server) still holds data when the run ends and the
// coordinator says stop. Its last report, sent after the stop, is applied
// and acked, and the result has it as the window's late data; the run
// returns once the agent closed its stream, not before.
func TestLastReportsAfterStop(t *testing.T) {
	c, err := New(Config{
		Agents: 1, Window: time.Hour, HeartbeatTimeout: time.Hour, Grace: 50 * time.Millisecond,
		Stages: []Stage{{Level: 1, Duration: 200 * time.Millisecond}}, StartDelay: time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	addr, ran := serveRun(t, ctx, c)
	fa, window := joinFake(t, ctx, addr)
	// No watermark and no report: the window closes by grace, the stage
	// ends and the run says stop.
	select {
	case <-fa.stopped:
	case <-ctx.Done():
		t.Fatal("no stop")
	}
	ttft := hdr.Default.New()
	for i := range 40 {
		ttft.RecordValue(int64(90_000 + i*1000))
	}
	last := &pb.Report{Seq: 1, WindowId: window, Counters: &pb.Counters{Requests: 40},
		Metrics: []*pb.MetricHistogram{{Metric: pb.Metric_METRIC_TTFT, Histogram: sparseToPB(ttft)}}}
	if err := fa.send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Report{Report: last}}); err != nil {
		t.Fatalf("send the last report: %v", err)
	}
	if !fa.waitAck(ctx, 1) {
		t.Fatal("the report sent after the stop was not acked")
	}
	select {
	case o := <-ran:
		t.Fatalf("the run returned (%v) before the agent closed its stream", o.err)
	case <-time.After(100 * time.Millisecond):
	}
	closed := time.Now()
	if err := fa.st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	o := <-ran
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	if wait := o.at.Sub(closed); wait > 2*time.Second {
		t.Errorf("the run returned %v after the agent's stream ended", wait)
	}
	var got *WindowResult
	for _, w := range o.res.Windows {
		if w.ID == window {
			got = w
		}
	}
	if got == nil {
		t.Fatalf("no window %d in the result", window)
	}
	if got.ClosedBy != "grace" || got.LateRequests != 40 || got.Late == nil || got.Late.Hist[record.TTFT] == nil || got.Late.Hist[record.TTFT].Count() != 40 {
		t.Errorf("window closed by %q with %d late requests (late data %v), want the last report's 40 as late data after a grace close",
			got.ClosedBy, got.LateRequests, got.Late)
	}
}
