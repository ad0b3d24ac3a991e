package agent

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// benchWindow returns an interval window whose 8 metric histograms and 2
// turn TTFT histograms (10 histograms, a report's worth) each hold values
// spread over 1 ms..251 ms, as the coordinator's BenchmarkMergeReport's
// reports do.
func benchWindow(values int) *record.Window {
	w := record.NewWindow(1, hdr.Default)
	fill := func(h *hdr.Histogram, k int) {
		for i := range values {
			h.RecordValue(int64(1000 + (i*7919+k*104729)%250000))
		}
	}
	for m, h := range w.Hist {
		fill(h, m)
	}
	for turn := 1; turn <= 2; turn++ {
		ts := &record.TurnStats{TTFT: hdr.Default.New(), Requests: int64(values)}
		fill(ts.TTFT, 10+turn)
		w.Turns[turn] = ts
	}
	return w
}

// BenchmarkReportToPB measures what an agent spends turning one interval
// window into its protocol report (10 histograms), the part of a report's
// cost that grows with the histograms: 200 values per histogram is a
// report of a few hundred requests, 100,000 a busy agent's ITL.
func BenchmarkReportToPB(b *testing.B) {
	for _, values := range []int{200, 100_000} {
		b.Run(fmt.Sprintf("%d-values", values), func(b *testing.B) {
			w := benchWindow(values)
			var size int
			b.ReportAllocs()
			for b.Loop() {
				size = proto.Size(reportToPB(1, w))
			}
			b.ReportMetric(float64(size), "wire-bytes/report")
		})
	}
}
