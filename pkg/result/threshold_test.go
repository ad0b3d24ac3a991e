package result

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// sample is a finished request sent in window 1.
func sample(ttft, e2e time.Duration, tokens int, class client.Class) *record.Sample {
	return &record.Sample{Window: 1, Result: &client.Result{
		Start: time.Unix(0, 0), TTFT: ttft, E2E: e2e, OutputTokens: tokens, UsageReported: true, Class: class,
	}}
}

// TestGoodputAndJudge: goodput counts requests meeting every SLO named, as
// vLLM's does; thresholds judge the summary and a failed one is a
// ThresholdError naming it.
func TestGoodputAndJudge(t *testing.T) {
	slo, err := ParseSLO("ttft:100, tpot:10")
	if err != nil || slo != (SLO{TTFT: 100 * time.Millisecond, TPOT: 10 * time.Millisecond}) {
		t.Fatalf("ParseSLO = %+v, %v", slo, err)
	}
	if _, err := ParseSLO("ttft:fast"); err == nil {
		t.Error("ParseSLO accepted ttft:fast")
	}
	rec := record.NewRecorder(hdr.Default)
	rec.SetGood(slo.Good)
	for _, s := range []*record.Sample{
		sample(50*time.Millisecond, 140*time.Millisecond, 10, client.ClassOK),  // good: tpot 10 ms
		sample(50*time.Millisecond, 500*time.Millisecond, 10, client.ClassOK),  // tpot 50 ms: not good
		sample(150*time.Millisecond, 200*time.Millisecond, 10, client.ClassOK), // ttft over: not good
		sample(10*time.Millisecond, 20*time.Millisecond, 2, client.ClassConnect),
	} {
		s.Window = 1
		rec.Record(s)
	}
	w := rec.Drain()[0]
	if n := w.Counters.Good; n != 1 {
		t.Fatalf("good requests %d, want 1", n)
	}
	start := time.Unix(0, 0)
	f := Load{}.Facts(start, start.Add(2*time.Second), 2*time.Second)
	f.SLO = slo
	sum, err := New(w, f)
	if err != nil {
		t.Fatal(err)
	}
	if sum.RequestGoodput != 0.5 || sum.SLOAttainment != 0.25 {
		t.Errorf("goodput %v/s, attainment %v; want 0.5/s, 0.25", sum.RequestGoodput, sum.SLOAttainment)
	}
	var out strings.Builder
	ths := []Threshold{}
	for _, s := range []string{"ttft_p50<60ms", "error_rate<10%", "goodput>=0.5", "e2el_p99<300ms"} {
		th, err := ParseThreshold(s)
		if err != nil {
			t.Fatal(err)
		}
		ths = append(ths, th)
	}
	err = Judge(&out, ths, sum, w)
	var te *ThresholdError
	if !errors.As(err, &te) || len(te.Failed) != 2 {
		t.Fatalf("Judge = %v, want 2 failures (error_rate 25%%, e2el p99 500 ms):\n%s", err, out.String())
	}
	for _, want := range []string{"pass ttft_p50<60ms", "FAIL error_rate<10%", "measured 25.00%", "pass goodput>=0.5", "FAIL e2el_p99<300ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("judge output lacks %q:\n%s", want, out.String())
		}
	}
	// Unmeasured is a failure, never a pass.
	empty := record.NewWindow(1, hdr.Default)
	es, _ := New(empty, Load{}.Facts(start, start.Add(time.Second), time.Second))
	if v := ths[0].Check(es, empty); v.Pass || !math.IsNaN(v.Actual) {
		t.Errorf("an empty window passed %s: %+v", ths[0].Raw, v)
	}
}
