package coordinator

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestRefusedReportLeavesWindowUnchanged sends a window reports whose
// histograms are malformed in each way the merge checks, some in the
// report's last histogram (after nine good ones were added) and one in a
// turn the window has not seen: each is refused whole, with the error
// the edge used to give, and the window's merged data and coverage are
// exactly what they were. A good report after them merges as usual.
func TestRefusedReportLeavesWindowUnchanged(t *testing.T) {
	cfg := hdr.Default
	w := newWindow(1, 0, KindMeasure, time.Unix(0, 0), cfg)
	w.ingest.keep = true // the checked histograms are handed on, as with the live view
	m := &member{id: "a"}
	w.addMember(m, time.Unix(0, 0))
	seq := uint64(0)
	convert := func(msg *pb.ConnectRequest) report {
		t.Helper()
		seq++
		msg.GetReport().Seq = seq
		got, err := messageFromPB(msg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep, ok := got.(report)
		if !ok {
			t.Fatalf("the edge refused the report's shape: %+v", got)
		}
		return rep
	}
	for i := range 3 {
		if err := w.apply(m, convert(benchReport(0, 1, i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	before := w.merged().Clone()
	coverBefore := *w.cover[m]

	other := hdr.Config{LowestMicros: 1, HighestMicros: 3_600_000_000, SigFigs: 2}.New()
	other.RecordValue(5000)
	last := func(r *pb.Report) *pb.SparseHistogram { return r.Turns[len(r.Turns)-1].Ttft }
	cases := []struct {
		name string
		bad  func(r *pb.Report)
		want string // in the error
	}{
		{"index past the counts in the last histogram", func(r *pb.Report) {
			h := last(r)
			h.Counts = protowire.AppendVarint(h.Counts, protowire.EncodeZigZag(-1_000_000))
			h.Counts = append(h.Counts, 2)
			h.TotalCount++
		}, "turn 2: decode histogram: corrupt encoded histogram: zero run of 1000000"},
		{"index past the counts in a new turn", func(r *pb.Report) {
			h := sparseToPB(other)
			h.LowestMicros, h.HighestMicros, h.SignificantFigures = cfg.LowestMicros, cfg.HighestMicros, int32(cfg.SigFigs)
			h.Counts = []byte{0x00}
			for range 3 {
				h.Counts = protowire.AppendVarint(h.Counts, protowire.EncodeZigZag(-20_000))
			}
			h.Counts = append(h.Counts, 2)
			h.TotalCount = 1
			r.Turns = append(r.Turns, &pb.TurnStats{Turn: 5, Ttft: h, Requests: 1})
		}, "turn 5: decode histogram: corrupt encoded histogram: zero run of 20000"},
		{"count past the total in the last histogram", func(r *pb.Report) {
			h := last(r)
			h.Counts = append(h.Counts, protowire.AppendVarint(nil, protowire.EncodeZigZag(math.MaxInt64))...)
		}, "turn 2: decode histogram: corrupt encoded histogram: counts sum past MaxInt64"},
		{"counts past MaxInt64 with the total to match", func(r *pb.Report) {
			h := r.Metrics[3].Histogram
			big := protowire.AppendVarint(nil, protowire.EncodeZigZag(math.MaxInt64/2+1))
			h.Counts = append(append(append([]byte(nil), big...), 0x00), big...)
			h.TotalCount = math.MaxInt64
		}, "decode histogram: corrupt encoded histogram: counts sum past MaxInt64"},
		{"total does not match", func(r *pb.Report) { last(r).TotalCount++ }, "turn 2: decode histogram: corrupt encoded histogram: counts sum to"},
		{"truncated varint", func(r *pb.Report) {
			h := r.Metrics[7].Histogram
			h.Counts = append(h.Counts, 0x80)
		}, "decode histogram: corrupt encoded histogram: truncated count"},
		{"wrong bucket configuration", func(r *pb.Report) { r.Turns[0].Ttft = sparseToPB(other) }, "turn 1: decode histogram hdr-v1:1:3600000000:2 as hdr-v1:1:600000000:3"},
		{"clamp count above the total", func(r *pb.Report) { last(r).Clamped = last(r).TotalCount + 1 }, "turn 2: decode histogram: corrupt encoded histogram: clamp count"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := benchReport(0, 1, 7)
			tc.bad(msg.GetReport())
			rep := convert(msg)
			err := w.apply(m, rep, nil)
			if !refused(err) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "decode report ") {
				t.Fatalf("apply = %v, want a refusal saying %q", err, tc.want)
			}
			if !errors.Is(err, hdr.ErrCorrupt) && !errors.Is(err, hdr.ErrConfigMismatch) {
				t.Errorf("refusal %v wraps neither hdr.ErrCorrupt nor hdr.ErrConfigMismatch", err)
			}
			if !w.merged().Equal(before) {
				t.Error("a refused report changed the window's merged data")
			}
			if *w.cover[m] != coverBefore {
				t.Errorf("coverage %+v after a refusal, want %+v", *w.cover[m], coverBefore)
			}
			for m, h := range rep.Window.Hist {
				if h != nil {
					t.Errorf("a refused report's %s was handed on", record.Metric(m))
				}
			}
		})
	}

	// A good report still merges exactly after the refusals.
	good := convert(benchReport(0, 1, 7))
	if err := w.apply(m, good, nil); err != nil {
		t.Fatal(err)
	}
	want := before.Clone()
	if err := want.Merge(good.Window); err != nil {
		t.Fatal(err)
	}
	if !w.merged().Equal(want) {
		t.Error("a good report after the refusals merged wrong")
	}
	if got := w.cover[m].reports; got != coverBefore.reports+1 {
		t.Errorf("coverage counts %d reports, want %d", got, coverBefore.reports+1)
	}
}
