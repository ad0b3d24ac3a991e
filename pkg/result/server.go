package result

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// serverFigure is one server-side figure of a window, by its name in the
// sweep TSV and result.json.
type serverFigure struct {
	key, label string
	v          *float64
	// scale turns the figure into what the block prints (100: percent);
	// count prints it as an integer.
	scale float64
	count bool
}

// serverFigures are the server-side figures the block and result.json
// carry: the sweep TSV's columns, then the running requests and the
// server's own TTFT.
func serverFigures(w *servermetrics.Window) []serverFigure {
	t := w.Total
	ms := func(v *float64) *float64 {
		if v == nil {
			return nil
		}
		m := 1000 * *v
		return &m
	}
	return []serverFigure{
		{"server_hit_rate", "Server KV cache hit rate (%):", t.HitRate, 100, false},
		{"queue_mean", "Queued requests, mean:", t.QueueMean, 1, false},
		{"queue_max", "Queued requests, max:", t.QueueMax, 1, true},
		{"kv_usage_max", "KV cache usage, max (%):", t.KVUsageMax, 100, false},
		{"preemptions", "Preemptions:", t.Preemptions, 1, true},
		{"worker_skew", "Worker skew (max/mean requests):", w.WorkerSkew(), 1, false},
		{"spec_accept_rate", "Spec. decode acceptance (%):", t.SpecAcceptRate, 100, false},
		{"running_mean", "Running requests, mean:", t.RunningMean, 1, false},
		{"server_ttft_mean_ms", "Server mean TTFT (ms):", ms(t.TTFT.Mean), 1, false},
		{"server_ttft_p95_ms", "Server P95 TTFT (ms):", ms(t.TTFT.P95), 1, false},
		{"server_queue_time_mean_ms", "Server mean queue time (ms):", ms(t.QueueTime.Mean), 1, false},
		{"server_queue_time_p95_ms", "Server P95 queue time (ms):", ms(t.QueueTime.P95), 1, false},
	}
}

// writeServer prints the server-side section: each figure, "n/a" when it
// was not measured (never 0), and the endpoints that could not be read.
func (s *Summary) writeServer(b *blockWriter) {
	b.rule("Server-side", '-')
	b.int("Endpoints scraped:", int64(len(s.Server.Endpoints)))
	for _, f := range serverFigures(s.Server) {
		switch {
		case f.v == nil:
			b.str(f.label, "n/a")
		case f.count:
			b.int(f.label, int64(math.Round(*f.v)))
		default:
			b.float(f.label, f.scale**f.v)
		}
	}
	if bal := s.Server.Balance; bal.Workers > 0 {
		b.int("Workers:", int64(bal.Workers))
	}
	if s.Server.Reset {
		b.str("Counter reset:", "yes, a server restarted in the window")
	}
	missing := s.Server.Missing()
	for _, e := range slices.Sorted(maps.Keys(missing)) {
		b.str("Not read ("+e+"):", missing[e])
	}
	absent := absentFigures(s.Server)
	for _, k := range slices.Sorted(maps.Keys(absent)) {
		b.str("Absent ("+k+"):", absent[k])
	}
}

// printedAbsent are the keys of servermetrics.Window.Absent behind the
// figures the block and result.json print. spec_accept_rate is left out:
// its counters exist only while speculative decoding is on, so their
// absence is the normal case, not a fault to report.
var printedAbsent = []string{
	"server_hit_rate", "queue", "kv_usage", "preemptions", "requests",
	"running", "server_ttft", "server_queue_time",
}

// absentFigures returns the window's Absent entries for the printed
// figures: which metrics were looked for and not found.
func absentFigures(w *servermetrics.Window) map[string]string {
	out := map[string]string{}
	for _, k := range printedAbsent {
		if v, ok := w.Absent[k]; ok {
			out[k] = v
		}
	}
	return out
}

// serverFields are result.json's server-side keys: each figure (null
// when not measured), the requests per worker, and in server_missing the
// endpoints not read (by URL) and the figures whose metrics no endpoint
// exports (by figure, naming the metrics looked for).
func serverFields(w *servermetrics.Window) []field {
	var out []field
	for _, f := range serverFigures(w) {
		var v any
		if f.v != nil {
			v = *f.v
		}
		out = append(out, field{f.key, v})
	}
	workers := object{}
	for _, name := range slices.Sorted(maps.Keys(w.Workers)) {
		workers = append(workers, field{name, w.Workers[name].Requests})
	}
	out = append(out, field{"server_requests_per_worker", workers})
	missing := object{}
	m := w.Missing()
	maps.Copy(m, absentFigures(w))
	for _, e := range slices.Sorted(maps.Keys(m)) {
		missing = append(missing, field{e, m[e]})
	}
	return append(out, field{"server_missing", missing})
}

// ServerReconciliation compares the client-side hit rate (usage, 0–1) with
// the server's own (counters) and, when they differ by more than
// ReconcileTolerance, says so with the likely causes; "" when they agree
// or either is not measured.
func ServerReconciliation(client float64, clientMeasured bool, server *float64) string {
	if !clientMeasured || server == nil {
		return ""
	}
	d := 100 * (*server - client)
	if d <= 100*ReconcileTolerance && d >= -100*ReconcileTolerance {
		return ""
	}
	var why []string
	if client == 0 {
		why = append(why, "the server may not report cached tokens in usage (vLLM needs --enable-prompt-tokens-details; a proxy may drop the field)")
	}
	if d > 0 {
		why = append(why, "other traffic on the server (readiness probes, other clients) counts on its side only")
	} else {
		why = append(why, "the server counts its own way (blocks, not tokens; queries of preempted or failed requests)")
	}
	why = append(why, "the definitions differ: usage counts cached prompt tokens of successful turns sent in the window, the counters every prefix-cache lookup made by the server in it")
	return fmt.Sprintf("client-side hit rate %.1f%% against server-side %.1f%% (%+.1f points): %s",
		100*client, 100**server, d, strings.Join(why, "; "))
}

// ReconcileTolerance is how far (as a 0–1 fraction: 3 points) the client-
// and server-side hit rates may differ before the difference is flagged.
const ReconcileTolerance = 0.03
