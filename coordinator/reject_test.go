package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestBadReportRejectedAlone sends, over real loopback gRPC, reports that
// are malformed in each way the edge checks, between good ones: each bad
// one is acked and counted as a merge error, the stream stays open, the
// good reports are merged exactly, and the window says what it misses
// (degraded, the rejections in the agent's coverage).
func TestBadReportRejectedAlone(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := New(Config{
		Agents: 1, Window: time.Hour, HeartbeatTimeout: time.Hour, Grace: time.Hour,
		Stages: []Stage{{Level: 1, Duration: time.Hour}}, StartDelay: time.Millisecond,
	}, nil, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	addr, ran := serveRun(t, runCtx, c)
	fa, window := joinFake(t, ctx, addr)

	ttft := hdr.Default.New()
	for i := range 100 {
		ttft.RecordValue(int64(1000 + i*37))
	}
	good := func() *pb.Report {
		return &pb.Report{WindowId: window, Counters: &pb.Counters{Requests: 100},
			Metrics: []*pb.MetricHistogram{{Metric: pb.Metric_METRIC_TTFT, Histogram: sparseToPB(ttft)}},
			Turns:   []*pb.TurnStats{{Turn: 1, Ttft: sparseToPB(ttft), Requests: 100}}}
	}
	other := hdr.Config{LowestMicros: 1, HighestMicros: 3_600_000_000, SigFigs: 2}.New()
	other.RecordValue(5000)
	cases := []struct {
		name string
		bad  func(r *pb.Report)
	}{
		{"truncated varint", func(r *pb.Report) {
			h := r.Metrics[0].Histogram
			h.Counts = append(h.Counts, 0x80)
		}},
		{"total does not match", func(r *pb.Report) { r.Metrics[0].Histogram.TotalCount++ }},
		{"index out of range", func(r *pb.Report) {
			h := r.Metrics[0].Histogram
			h.Counts = protowire.AppendVarint(h.Counts, protowire.EncodeZigZag(-1_000_000))
			h.Counts = append(h.Counts, 2)
			h.TotalCount++
		}},
		{"geometry mismatch", func(r *pb.Report) { r.Metrics[0].Histogram = sparseToPB(other) }},
		{"clamp count above total", func(r *pb.Report) { r.Turns[0].Ttft.Clamped = 101 }},
		{"unknown metric", func(r *pb.Report) { r.Metrics[0].Metric = 99 }},
		{"an older agent's V2 field", func(r *pb.Report) {
			// Field 2, bytes: what an agent before SparseHistogram sent.
			r.Metrics[0].ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("HISTFAAAA")))
		}},
	}
	seq := uint64(0)
	send := func(r *pb.Report) {
		t.Helper()
		seq++
		r.Seq = seq
		if err := fa.send(&pb.ConnectRequest{Msg: &pb.ConnectRequest_Report{Report: r}}); err != nil {
			t.Fatal(err)
		}
		if !fa.waitAck(ctx, seq) {
			t.Fatalf("report %d not acked: the stream ended or timed out", seq)
		}
	}
	send(good())
	for _, tc := range cases {
		r := good()
		tc.bad(r)
		send(r)
	}
	send(good())

	stopRun()
	out := <-ran
	if out.res == nil {
		t.Fatalf("run: %v", out.err)
	}
	var w *WindowResult
	for _, x := range out.res.Windows {
		if x.ID == window {
			w = x
		}
	}
	if w == nil {
		t.Fatalf("window %d missing from the result", window)
	}
	// Exactly the two good reports, nothing of the bad ones.
	want := record.NewWindow(window, hdr.Default)
	for range 2 {
		if err := want.Hist[record.TTFT].Merge(ttft); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Data.Counters.Requests; got != 200 {
		t.Errorf("window requests %d, want the good reports' 200", got)
	}
	if !w.Data.Hist[record.TTFT].Equal(want.Hist[record.TTFT]) {
		t.Errorf("window TTFT %+v, want the good reports' %+v", w.Data.Hist[record.TTFT].Summary(), want.Hist[record.TTFT].Summary())
	}
	if ts := w.Data.Turns[1]; ts == nil || ts.Requests != 200 || ts.TTFT.Count() != 200 {
		t.Errorf("window turn 1 %+v, want the good reports' 200 requests", ts)
	}
	if len(w.Coverage) != 1 || w.Coverage[0].Reports != 2 || w.Coverage[0].Rejected != len(cases) {
		t.Errorf("coverage %+v, want 2 reports applied and %d rejected", w.Coverage, len(cases))
	}
	if !w.Degraded {
		t.Error("a window missing rejected reports is not marked degraded")
	}
	const metrics = `
# HELP fleetbench_coordinator_report_merge_errors_total Interval reports that could not be merged into their window.
# TYPE fleetbench_coordinator_report_merge_errors_total counter
fleetbench_coordinator_report_merge_errors_total 7
# HELP fleetbench_coordinator_reports_applied_total Interval reports of agents merged into the run's windows.
# TYPE fleetbench_coordinator_reports_applied_total counter
fleetbench_coordinator_reports_applied_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(metrics),
		"fleetbench_coordinator_report_merge_errors_total", "fleetbench_coordinator_reports_applied_total"); err != nil {
		t.Error(err)
	}
}
