package result

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// base is the crafted run's start.
var base = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// craftedSamples is a deterministic multi-turn run: 40 conversations of 3
// turns, later turns hitting the KV cache, three failures and one E2E
// beyond the histogram range.
func craftedSamples() []*record.Sample {
	var out []*record.Sample
	for conv := 0; conv < 40; conv++ {
		for turn := 1; turn <= 3; turn++ {
			start := base.Add(time.Duration(conv)*250*time.Millisecond + time.Duration(turn-1)*5*time.Second)
			lag := time.Duration(conv%5) * time.Millisecond
			ttft := 80*time.Millisecond + time.Duration(conv)*3*time.Millisecond
			prompt, cached := 1000+turn*400, 0
			if turn > 1 {
				ttft = 30*time.Millisecond + time.Duration(conv)*time.Millisecond
				cached = (turn - 1) * 400
			}
			var itl []time.Duration
			e2e := ttft
			for i := 0; i < 49; i++ {
				g := 20*time.Millisecond + time.Duration((conv+i)%7)*time.Millisecond
				itl = append(itl, g)
				e2e += g
			}
			res := &client.Result{
				Start:         start,
				TTFB:          ttft - 2*time.Millisecond,
				TTFT:          ttft,
				E2E:           e2e,
				ITL:           itl,
				PromptTokens:  prompt,
				OutputTokens:  50,
				CachedTokens:  cached,
				UsageReported: true,
				FinishReason:  "length",
				Status:        200,
				Worker:        "replica-" + strconv.Itoa(conv%4),
			}
			switch {
			case conv == 7 && turn == 2, conv == 21 && turn == 3:
				res = &client.Result{Start: start, TTFB: 5 * time.Millisecond, E2E: 6 * time.Millisecond,
					Status: 503, Class: client.ClassHTTP5xx, Err: errors.New("http 503: upstream overloaded")}
			case conv == 33 && turn == 1:
				res = &client.Result{Start: start, E2E: 30 * time.Second,
					Class: client.ClassTimeout, Err: errors.New("first token timeout after 30s")}
			case conv == 39 && turn == 3:
				res.E2E = 11 * time.Minute // beyond hdr.Default's range: clamped
			}
			out = append(out, &record.Sample{
				Window: 1, Conversation: conv, Turn: turn,
				Intended: start.Add(-lag), Result: res,
			})
		}
	}
	return out
}

func craftedWindow(t *testing.T) (*record.Window, *Peaks) {
	t.Helper()
	w := record.NewWindow(1, hdr.Default)
	p := NewPeaks(base)
	for _, s := range craftedSamples() {
		w.Add(s)
		p.Add(s)
	}
	w.Counters.LateSends = 4
	w.Counters.ConversationsStarted = 40
	w.Counters.ConversationsCompleted = 38
	return w, p
}

func craftedFacts(p *Peaks) Facts {
	tok, conc := p.Max()
	return Facts{
		Duration:               60 * time.Second,
		MaxConcurrency:         16,
		Model:                  "meta-llama/Llama-3.1-8B-Instruct",
		Target:                 "http://user:secret@localhost:8000/v1?api_key=secret",
		Workload:               "docchat",
		Version:                "v0.0.0-test",
		Start:                  base,
		End:                    base.Add(60 * time.Second),
		PeakOutputTokensPerSec: tok,
		PeakConcurrentRequests: conc,
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run with -update after checking):\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name  string
		facts func(Facts) Facts
	}{
		{"closed_loop", func(f Facts) Facts { return f }},
		{"open_loop", func(f Facts) Facts {
			f.MaxConcurrency = 0
			f.RequestRate = 2.5
			f.Percentiles = []float64{50, 90, 99.9}
			f.Label = "kv-aware"
			return f
		}},
		{"interrupted", func(f Facts) Facts {
			f.Interrupted = true
			return f
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, p := craftedWindow(t)
			s, err := New(w, tt.facts(craftedFacts(p)))
			if err != nil {
				t.Fatal(err)
			}
			var block, js bytes.Buffer
			if err := WriteBlock(&block, s); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&js, s); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name+".block.golden", block.Bytes())
			golden(t, tt.name+".result.golden.json", js.Bytes())
		})
	}
}

// blockLine is one parsed "{:<40} {:<10}" line.
type blockLine struct{ label, value string }

// parseBlock reads a printed block back, checking the layout vLLM's
// format strings produce: 50-wide rules, a 40-wide label column, one
// space, a value column at least 10 wide.
func parseBlock(t *testing.T, text string) []blockLine {
	t.Helper()
	var out []blockLine
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if trimmed := strings.Trim(line, "="); trimmed != line || strings.Trim(line, "-") != line {
			if len(line) != BlockWidth {
				t.Errorf("line %d: rule %q is %d wide, want %d", n, line, len(line), BlockWidth)
			}
			continue
		}
		if len(line) < LabelWidth+1+10 {
			t.Errorf("line %d: %q shorter than %d", n, line, LabelWidth+11)
			continue
		}
		label, sep, value := line[:LabelWidth], line[LabelWidth], line[LabelWidth+1:]
		if sep != ' ' || label[0] == ' ' || !strings.HasSuffix(strings.TrimRight(label, " "), ":") {
			t.Errorf("line %d: label column misaligned: %q", n, line)
		}
		if value[0] == ' ' {
			t.Errorf("line %d: value not left-aligned at column %d: %q", n, LabelWidth+1, line)
		}
		out = append(out, blockLine{strings.TrimRight(label, " "), strings.TrimRight(value, " ")})
	}
	return out
}

func TestBlockParsesBack(t *testing.T) {
	w, p := craftedWindow(t)
	s, err := New(w, craftedFacts(p))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteBlock(&b, s); err != nil {
		t.Fatal(err)
	}
	lines := parseBlock(t, b.String())
	got := map[string]string{}
	for _, l := range lines {
		if _, dup := got[l.label]; dup {
			t.Errorf("label %q printed twice", l.label)
		}
		got[l.label] = l.value
	}
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	want := map[string]string{
		"Successful requests:":             strconv.FormatInt(s.Completed, 10),
		"Failed requests:":                 "3",
		"Maximum request concurrency:":     "16",
		"Benchmark duration (s):":          "60.00",
		"Total input tokens:":              strconv.FormatInt(s.TotalInputTokens, 10),
		"Request throughput (req/s):":      f2(float64(s.Completed) / 60),
		"Output token throughput (tok/s):": f2(float64(s.TotalOutputTokens) / 60),
		"Mean TTFT (ms):":                  f2(s.TTFT.Mean),
		"P99 TTFT (ms):":                   f2(s.TTFT.Percentiles[0].Ms),
		"Median E2EL (ms):":                f2(s.E2EL.Median),
		"Failed requests (http_5xx):":      "2",
		"Failed requests (timeout):":       "1",
		"Clamped e2e samples:":             "1",
		"Workload:":                        "docchat",
	}
	for label, v := range want {
		if got[label] != v {
			t.Errorf("%s = %q, want %q", label, got[label], v)
		}
	}
	if _, ok := got["Request rate configured (RPS):"]; ok {
		t.Error("closed loop printed a configured request rate")
	}
	if s.Completed != 117 {
		t.Errorf("completed = %d, want 117", s.Completed)
	}
}

func TestRules(t *testing.T) {
	tests := []struct{ title, fill, want string }{
		{" Serving Benchmark Result ", "=", "============ Serving Benchmark Result ============"},
		{"Time to First Token", "-", "---------------Time to First Token----------------"},
		{"Time per Output Token (excl. 1st token)", "-", "-----Time per Output Token (excl. 1st token)------"},
		{"Inter-token Latency", "-", "---------------Inter-token Latency----------------"},
		{"End-to-end Latency", "-", "----------------End-to-end Latency----------------"},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			var b blockWriter
			b.rule(tt.title, tt.fill[0])
			if got := strings.TrimSuffix(b.String(), "\n"); got != tt.want {
				t.Errorf("rule = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLineFormats(t *testing.T) {
	var b blockWriter
	b.int("Successful requests:", 1000)
	b.float("Benchmark duration (s):", 123.456)
	b.float("Peak concurrent requests:", 5)
	b.float("Mean TTFT (ms):", 12345678.125)
	want := "Successful requests:                     1000      \n" +
		"Benchmark duration (s):                  123.46    \n" +
		"Peak concurrent requests:                5.00      \n" +
		"Mean TTFT (ms):                          12345678.12\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

// vllmResultKeys are the keys of vLLM's result JSON (serve.py main_async
// and benchmark) for --percentile-metrics ttft,tpot,itl,e2el and
// --metric-percentiles 99.
var vllmResultKeys = []string{
	"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
	"request_rate", "burstiness", "max_concurrency",
	"duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
	"request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
	"max_output_tokens_per_s", "max_concurrent_requests",
	"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
	"mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
	"mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms",
	"mean_e2el_ms", "median_e2el_ms", "std_e2el_ms", "p99_e2el_ms",
}

func TestJSONHasEveryVLLMKey(t *testing.T) {
	w, p := craftedWindow(t)
	s, err := New(w, craftedFacts(p))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, s); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("result is not JSON: %v\n%s", err, b.Bytes())
	}
	for _, k := range vllmResultKeys {
		if _, ok := m[k]; !ok {
			t.Errorf("missing vLLM key %q", k)
		}
	}
	if got := VLLMKeys(s); strings.Join(got, ",") != strings.Join(vllmResultKeys, ",") {
		t.Errorf("VLLMKeys order\n got %v\nwant %v", got, vllmResultKeys)
	}
	checks := map[string]any{
		"request_rate":    "inf",
		"max_concurrency": 16.0,
		"completed":       117.0,
		"failed":          3.0,
		"duration":        60.0,
		"request_goodput": nil,
		"label":           nil,
		"target":          "http://localhost:8000/v1",
		"kv_hit_rate":     s.HitRate,
	}
	for k, v := range checks {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	if strings.Contains(b.String(), "secret") {
		t.Error("result.json contains the target's credentials")
	}
	for _, k := range []string{"kv_hit_request_share", "ttft_by_turn", "errors_by_class", "ttft_intended_p50_ms",
		"ttft_intended_p99_ms", "lag_p99_ms", "fleetbench_version", "clamped_samples"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing fleetbench key %q", k)
		}
	}
}

func TestExtraPercentileKeys(t *testing.T) {
	w, p := craftedWindow(t)
	f := craftedFacts(p)
	f.Percentiles = []float64{95, 99.9}
	s, err := New(w, f)
	if err != nil {
		t.Fatal(err)
	}
	var js, block bytes.Buffer
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	if err := WriteBlock(&block, s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"p95_ttft_ms": `, `"p99.9_itl_ms": `, `"p95_e2el_ms": `} {
		if !strings.Contains(js.String(), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
	if strings.Contains(js.String(), `"p99_ttft_ms"`) {
		t.Error("JSON has p99 although not requested")
	}
	for _, l := range []string{"P95 TTFT (ms):", "P99.9 TPOT (ms):", "P95 E2EL (ms):"} {
		if !strings.Contains(block.String(), "\n"+l) {
			t.Errorf("block lacks %s", l)
		}
	}
}

func TestPercentilesMatchSamples(t *testing.T) {
	w, p := craftedWindow(t)
	s, err := New(w, craftedFacts(p))
	if err != nil {
		t.Fatal(err)
	}
	var ttft []float64
	for _, smp := range craftedSamples() {
		if smp.Result.OK() {
			ttft = append(ttft, ms(smp.Result.TTFT))
		}
	}
	for _, q := range []float64{50, 99} {
		exact := NearestRank(ttft, q)
		got := s.TTFT.Median
		if q == 99 {
			got = s.TTFT.Percentiles[0].Ms
		}
		if got < exact || got > exact*1.001 {
			t.Errorf("p%v TTFT = %v, want %v within 0.1%%", q, got, exact)
		}
	}
}

func TestNewRejects(t *testing.T) {
	w, _ := craftedWindow(t)
	tests := []struct {
		name string
		w    *record.Window
		f    Facts
	}{
		{"nil window", nil, Facts{Duration: time.Second}},
		{"zero duration", w, Facts{}},
		{"percentile zero", w, Facts{Duration: time.Second, Percentiles: []float64{0}}},
		{"percentile above 100", w, Facts{Duration: time.Second, Percentiles: []float64{100.5}}},
		{"negative rate", w, Facts{Duration: time.Second, RequestRate: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.w, tt.f); !errors.Is(err, ErrInvalidFacts) {
				t.Errorf("err = %v, want ErrInvalidFacts", err)
			}
		})
	}
}

func TestEmptyWindow(t *testing.T) {
	s, err := New(record.NewWindow(1, hdr.Default), Facts{Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteBlock(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, l := range parseBlock(t, b.String()) {
		if l.label == "Mean TTFT (ms):" && l.value != "0.00" {
			t.Errorf("empty mean TTFT = %q, want 0.00 as vLLM's np.mean(xs or 0)", l.value)
		}
	}
	if err := WriteJSON(&b, s); err != nil {
		t.Fatal(err)
	}
}

func TestPyFloat(t *testing.T) {
	// Each want is Python's repr(float(v)).
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0.0"},
		{1, "1.0"},
		{0.1, "0.1"},
		{60, "60.0"},
		{1.95, "1.95"},
		{0.0001, "0.0001"},
		{0.00001, "1e-05"},
		{2.5e-7, "2.5e-07"},
		{1e15, "1000000000000000.0"},
		{1e16, "1e+16"},
		{1.5e22, "1.5e+22"},
		{-3.25, "-3.25"},
		{123456789.123, "123456789.123"},
	}
	for _, tt := range tests {
		if got := pyFloat(tt.v); got != tt.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestWriteJSONFileAtomic(t *testing.T) {
	w, p := craftedWindow(t)
	s, err := New(w, craftedFacts(p))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "result.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSONFile(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := WriteJSON(&want, s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("file content differs from WriteJSON")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only result.json", len(entries))
	}
	if err := WriteJSONFile(filepath.Join(dir, "missing", "result.json"), s); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestPeaks(t *testing.T) {
	p := NewPeaks(base)
	mk := func(start, ttft time.Duration, itl ...time.Duration) *record.Sample {
		e2e := ttft
		for _, g := range itl {
			e2e += g
		}
		return &record.Sample{Result: &client.Result{Start: base.Add(start), TTFT: ttft, ITL: itl, E2E: e2e}}
	}
	ms100 := 100 * time.Millisecond
	p.Add(mk(0, ms100, ms100, ms100, ms100))                            // tokens at .1 .2 .3 .4 s; in flight [0, .4)
	p.Add(mk(500*time.Millisecond, ms100, ms100, 600*time.Millisecond)) // .6 .7 1.3; in flight [.5, 1.3)
	p.Add(mk(-time.Second, ms100))                                      // before origin: ignored
	failed := mk(0, ms100, ms100)
	failed.Result.Class = client.ClassStreamCut
	p.Add(failed)
	tok, conc := p.Max()
	// The two requests share second 0 but never overlap.
	if tok != 6 || conc != 1 {
		t.Errorf("Max() = %v, %v; want 6, 1", tok, conc)
	}
	q := NewPeaks(base)
	q.Add(mk(0, ms100)) // in flight [0, .1): overlaps the first
	if err := p.Merge(q); err != nil {
		t.Fatal(err)
	}
	if tok, conc = p.Max(); tok != 7 || conc != 2 {
		t.Errorf("after merge Max() = %v, %v; want 7, 2", tok, conc)
	}
	if err := p.Merge(NewPeaks(base.Add(time.Second))); !errors.Is(err, ErrOriginMismatch) {
		t.Errorf("merge of other origin: err = %v", err)
	}
}

func TestNearestRank(t *testing.T) {
	v := []float64{15, 20, 35, 40, 50}
	tests := []struct{ p, want float64 }{{5, 15}, {30, 20}, {40, 20}, {50, 35}, {100, 50}}
	for _, tt := range tests {
		if got := NearestRank(v, tt.p); got != tt.want {
			t.Errorf("NearestRank(p%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if !math.IsNaN(NearestRank(nil, 50)) || !math.IsNaN(NearestRank(v, 0)) {
		t.Error("NearestRank of no values or p=0 is not NaN")
	}
}

func TestWriteStringLikePython(t *testing.T) {
	// want is Python's json.dumps(v) (ensure_ascii=True).
	tests := []struct{ v, want string }{
		{"plain", `"plain"`},
		{"a\"b\\c\n\t\x01\x7f", `"a\"b\\c\n\t\u0001\u007f"`},
		{"é😀", `"\u00e9\ud83d\ude00"`},
		{"<&>", `"<&>"`},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		writeString(&b, tt.v)
		if b.String() != tt.want {
			t.Errorf("writeString(%q) = %s, want %s", tt.v, b.String(), tt.want)
		}
	}
}

// TestGoldenMatchesPython runs testdata/vllm_check.py, which prints vLLM's
// block with vLLM's own format strings from the golden JSON's values. It is
// skipped where python3 is not installed.
func TestGoldenMatchesPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	for name, ps := range map[string]string{"closed_loop": "99", "open_loop": "50,90,99.9"} {
		cmd := exec.CommandContext(t.Context(), py, "vllm_check.py", name, ps)
		cmd.Dir = "testdata"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}

// TestInterrupted checks that "interrupted": true is the last key of
// result.json and a line of the additions exactly when Facts.Interrupted is
// set, and that it changes nothing else.
func TestInterrupted(t *testing.T) {
	const key = `, "interrupted": true}`
	outputs := func(interrupted bool) (js, block string) {
		w, p := craftedWindow(t)
		f := craftedFacts(p)
		f.Interrupted = interrupted
		s, err := New(w, f)
		if err != nil {
			t.Fatal(err)
		}
		var jb, bb bytes.Buffer
		if err := WriteJSON(&jb, s); err != nil {
			t.Fatal(err)
		}
		if err := WriteBlock(&bb, s); err != nil {
			t.Fatal(err)
		}
		return jb.String(), bb.String()
	}
	plainJSON, plainBlock := outputs(false)
	cutJSON, cutBlock := outputs(true)
	if strings.Contains(plainJSON, "interrupted") || strings.Contains(plainBlock, "Interrupted") {
		t.Errorf("an uninterrupted run mentions interruption:\n%s\n%s", plainJSON, plainBlock)
	}
	if want := strings.TrimSuffix(plainJSON, "}") + key; cutJSON != want {
		t.Errorf("interrupted result.json:\n got %s\nwant %s", cutJSON, want)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(cutJSON), &v); err != nil || v["interrupted"] != true {
		t.Errorf("interrupted result.json does not decode with interrupted=true: %v, %v", err, v["interrupted"])
	}
	var found bool
	for _, l := range parseBlock(t, cutBlock) {
		found = found || l.label == "Interrupted:"
	}
	if !found {
		t.Errorf("interrupted block has no Interrupted line:\n%s", cutBlock)
	}
}

// TestGoldenJudged: the block of a judged fleet result: goodput and SLO
// attainment, an agent's note, the errors a server sent, and the pass and
// fail lines of its thresholds, as printed.
func TestGoldenJudged(t *testing.T) {
	w, p := craftedWindow(t)
	slo, err := ParseSLO("ttft:300 tpot:60")
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewRecorder(hdr.Default)
	rec.SetGood(slo.Good)
	for _, s := range craftedSamples() {
		s.Window = 1
		rec.Record(s)
	}
	w.Counters.Good = rec.Drain()[0].Counters.Good
	w.AddErrors([]record.ErrorStat{{Class: client.ClassBadRequest, Count: 2, First: base,
		Message: "This model's maximum context length is N tokens. However, you requested N tokens.",
		Example: "This model's maximum context length is 1024 tokens. However, you requested 3013 tokens."}})
	f := craftedFacts(p)
	f.SLO = slo
	f.AgentNotes = []string{"agent-2 failed at join (dataset): sharegpt dataset: stat data/sg.json: no such file or directory"}
	s, err := New(w, f)
	if err != nil {
		t.Fatal(err)
	}
	var ths []Threshold
	for _, raw := range []string{"ttft_p95<400ms", "error_rate<1%", "goodput>=0.1"} {
		th, err := ParseThreshold(raw)
		if err != nil {
			t.Fatal(err)
		}
		ths = append(ths, th)
	}
	var out bytes.Buffer
	if err := WriteBlock(&out, s); err != nil {
		t.Fatal(err)
	}
	var te *ThresholdError
	if err := Judge(&out, ths, s, w); !errors.As(err, &te) || len(te.Failed) == 0 {
		t.Fatalf("Judge = %v, want failed thresholds", err)
	}
	out.WriteString("error: " + te.Error() + "\n")
	golden(t, "judged.block.golden", out.Bytes())
}

// TestStopped checks that Facts.Stopped is written to result.json as
// "stopped", just before "interrupted", with the reason whole, and shown in
// the block's additions.
func TestStopped(t *testing.T) {
	const why = "fail-fast: every request failed with bad_request: This model's maximum context length is 1024 tokens. However, you requested 3017 tokens (2993 in the messages, 24 in the completion). Please reduce the length of the messages or completion."
	w, p := craftedWindow(t)
	f := craftedFacts(p)
	f.Interrupted, f.Stopped = true, why
	s, err := New(w, f)
	if err != nil {
		t.Fatal(err)
	}
	var jb, bb bytes.Buffer
	if err := WriteJSON(&jb, s); err != nil {
		t.Fatal(err)
	}
	if err := WriteBlock(&bb, s); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(jb.Bytes(), &v); err != nil || v["stopped"] != why {
		t.Errorf("result.json stopped = %v (%v), want %q", v["stopped"], err, why)
	}
	if want := `, "interrupted": true}`; !strings.HasSuffix(jb.String(), want) {
		t.Errorf("result.json does not end with %s: %s", want, jb.String())
	}
	if !strings.Contains(bb.String(), "Stopped:") || !strings.Contains(bb.String(), "Please reduce the length of the messages or completion.") {
		t.Errorf("block lacks the whole stop reason:\n%s", bb.String())
	}
}
