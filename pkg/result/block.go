package result

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
)

// BlockWidth is the width of the block's rules, as in vLLM.
const BlockWidth = 50

// LabelWidth is the width of the label column, as in vLLM.
const LabelWidth = 40

// WriteBlock prints s as vLLM's "Serving Benchmark Result" block, then
// fleetbench's additions in a second block in the same style. The vLLM
// block reproduces vllm/benchmarks/serve.py (v0.11–v0.13) line for line,
// with --percentile-metrics ttft,tpot,itl,e2el (fleetbench always prints
// the E2EL section, which vLLM prints only on request) and without goodput.
// Each line is written as Python's "{:<40} {:<10}" or "{:<40} {:<10.2f}"
// writes it, trailing spaces included. WriteBlock makes one Write call.
func WriteBlock(w io.Writer, s *Summary) error {
	var b blockWriter
	s.writeVLLM(&b)
	s.writeAdditions(&b)
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write result block: %w", err)
	}
	return nil
}

// writeVLLM follows the print statements of vLLM's benchmark() in order.
func (s *Summary) writeVLLM(b *blockWriter) {
	b.rule(" Serving Benchmark Result ", '=')
	b.int("Successful requests:", s.Completed)
	b.int("Failed requests:", s.Failed)
	if s.MaxConcurrency > 0 {
		b.int("Maximum request concurrency:", int64(s.MaxConcurrency))
	}
	if !math.IsInf(s.RequestRate, 1) {
		b.float("Request rate configured (RPS):", s.RequestRate)
	}
	b.float("Benchmark duration (s):", s.Duration.Seconds())
	b.int("Total input tokens:", s.TotalInputTokens)
	b.int("Total generated tokens:", s.TotalOutputTokens)
	b.float("Request throughput (req/s):", s.RequestThroughput)
	if !s.SLO.IsZero() {
		b.float("Request goodput (req/s):", s.RequestGoodput)
	}
	b.float("Output token throughput (tok/s):", s.OutputThroughput)
	b.float("Peak output token throughput (tok/s):", s.PeakOutputTokensPerSec)
	// vLLM formats this integer with {:<10.2f}.
	b.float("Peak concurrent requests:", float64(s.PeakConcurrentRequests))
	b.float("Total token throughput (tok/s):", s.TotalTokenThroughput)
	for _, st := range []Stats{s.TTFT, s.TPOT, s.ITL, s.E2EL} {
		b.rule(st.Header, '-')
		b.float("Mean "+st.Name+" (ms):", st.Mean)
		b.float("Median "+st.Name+" (ms):", st.Median)
		for _, p := range st.Percentiles {
			b.float("P"+pWord(p.P)+" "+st.Name+" (ms):", p.Ms)
		}
	}
	b.closeRule()
}

// writeAdditions prints fleetbench's own figures in vLLM's label style.
func (s *Summary) writeAdditions(b *blockWriter) {
	b.rule(" fleetbench Additions ", '=')
	if s.Workload != "" {
		b.str("Workload:", s.Workload)
	}
	if s.Interrupted {
		b.str("Interrupted:", "yes, the window was cut short")
	}
	if s.Stopped != "" {
		b.str("Stopped:", s.Stopped)
	}
	if len(s.AgentNotes) > 0 {
		b.rule("Agents", '-')
		for i, n := range s.AgentNotes {
			b.str(fmt.Sprintf("Agent note %d:", i+1), n)
		}
	}
	if !s.SLO.IsZero() {
		b.rule("Goodput", '-')
		b.str("Goodput SLO:", s.SLO.String())
		b.float("SLO attainment (%):", 100*s.SLOAttainment)
	}
	if s.Balance.Workers > 0 || s.WorkerHeaderNote != "" {
		b.rule("Workers (response header)", '-')
		if s.WorkerHeaderNote != "" {
			b.str("Worker header warning:", s.WorkerHeaderNote)
		}
	}
	if s.Balance.Workers > 0 {
		b.int("Workers:", int64(s.Balance.Workers))
		if v := s.Balance.RequestSkew; v != nil {
			b.float("Worker skew (max/mean requests):", *v)
		}
		if v := s.Balance.RequestCV; v != nil {
			b.float("Worker CV of requests:", *v)
		}
		if v := s.Balance.TokenSkew; v != nil {
			b.float("Worker skew (max/mean prompt tokens):", *v)
		}
	}
	if len(s.FinishReasons) > 0 {
		b.rule("Finish Reasons", '-')
		b.str("Finish reasons:", finishText(s.FinishReasons))
		if s.FinishWarning != "" {
			b.str("Answers stopped early:", s.FinishWarning)
		}
	}
	b.rule("KV Cache Reuse", '-')
	b.float("KV cache hit rate (%):", 100*s.HitRate)
	b.float("Requests with cache hit (%):", 100*s.HitRequestShare)
	b.int("Total cached tokens:", s.CachedTokens)
	if s.UsageMissing > 0 {
		b.int("Requests without usage:", s.UsageMissing)
	}
	if s.Server != nil {
		s.writeServer(b)
		if r := ServerReconciliation(s.HitRate, s.Completed > 0, s.Server.Total.HitRate); r != "" {
			b.str("Hit rates differ:", r)
		}
	}

	b.rule("TTFT by Turn", '-')
	for _, g := range []struct {
		name string
		tg   TurnGroup
	}{{"turn 1", s.FirstTurn}, {"later turns", s.LaterTurns}} {
		b.int("Requests, "+g.name+":", g.tg.Requests)
		b.float("P50 TTFT, "+g.name+" (ms):", g.tg.P50)
		b.float("P95 TTFT, "+g.name+" (ms):", g.tg.P95)
		b.float("P99 TTFT, "+g.name+" (ms):", g.tg.P99)
		b.float("KV cache hit rate, "+g.name+" (%):", 100*g.tg.HitRate)
	}

	b.rule("Schedule Lag (Coordinated Omission)", '-')
	b.float("P50 TTFT from intended send (ms):", s.TTFTIntendedP50)
	b.float("P99 TTFT from intended send (ms):", s.TTFTIntendedP99)
	b.float("P99 E2EL from intended send (ms):", s.E2EIntendedP99)
	b.float("P99 schedule lag (ms):", s.LagP99)
	b.int("Late sends:", s.LateSends)
	b.int("Dropped sends:", s.Dropped)

	if len(s.ErrorsByClass) > 0 {
		b.rule("Errors by Class", '-')
		for _, e := range s.ErrorsByClass {
			b.int("Failed requests ("+string(e.Class)+"):", e.Count)
		}
	}
	if len(s.TopErrors) > 0 {
		b.rule("Top Errors", '-')
		for i, e := range s.TopErrors {
			if i == MaxBlockErrors {
				b.int("More distinct errors (result.json):", int64(len(s.TopErrors)-i))
				break
			}
			text := e.Example
			if text == "" {
				text = e.Message
			}
			b.str(fmt.Sprintf("Error %d (%s, %d requests):", i+1, e.Class, e.Count), text)
		}
	}
	if len(s.Clamped) > 0 {
		b.rule("Clamped Samples", '-')
		for _, c := range s.Clamped {
			b.int("Clamped "+c.Metric+" samples:", c.Count)
		}
	}
	if s.Restarted > 0 || s.Fallbacks > 0 {
		b.rule("Sessions", '-')
		b.int("Restarted turns:", s.Restarted)
		b.int("Fallbacks:", s.Fallbacks)
	}
	b.closeRule()
}

// blockWriter formats lines as Python's str.format does for vLLM's block.
type blockWriter struct{ bytes.Buffer }

// rule is "{s:{c}^{n}}".format(s=title, n=50, c=fill). Python centres with
// the odd padding character on the right.
func (b *blockWriter) rule(title string, fill byte) {
	pad := BlockWidth - len(title)
	if pad < 0 {
		pad = 0
	}
	left := pad / 2
	b.WriteString(strings.Repeat(string(fill), left))
	b.WriteString(title)
	b.WriteString(strings.Repeat(string(fill), pad-left))
	b.WriteByte('\n')
}

// closeRule is print("=" * 50).
func (b *blockWriter) closeRule() {
	b.WriteString(strings.Repeat("=", BlockWidth))
	b.WriteByte('\n')
}

// int is "{:<40} {:<10}".format(label, n).
func (b *blockWriter) int(label string, n int64) {
	fmt.Fprintf(&b.Buffer, "%-40s %-10d\n", label, n)
}

// str is "{:<40} {:<10}".format(label, s).
func (b *blockWriter) str(label, s string) {
	fmt.Fprintf(&b.Buffer, "%-40s %-10s\n", label, s)
}

// float is "{:<40} {:<10.2f}".format(label, v). Go's %.2f and Python's
// round the exact binary value the same way; only the spellings of the
// non-finite values differ, so those are written as Python writes them.
func (b *blockWriter) float(label string, v float64) {
	switch {
	case math.IsNaN(v):
		fmt.Fprintf(&b.Buffer, "%-40s %-10s\n", label, "nan")
	case math.IsInf(v, 1):
		fmt.Fprintf(&b.Buffer, "%-40s %-10s\n", label, "inf")
	case math.IsInf(v, -1):
		fmt.Fprintf(&b.Buffer, "%-40s %-10s\n", label, "-inf")
	default:
		fmt.Fprintf(&b.Buffer, "%-40s %-10.2f\n", label, v)
	}
}
