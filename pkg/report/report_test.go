package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenSweep is two runs × two modes × three levels, the mode order
// alternated, one degraded point; kv holds the SLA up to 60, round_robin
// up to 40 (four levels: 20, 40, 60, 80).
func goldenSweep() *Sweep {
	s := &Sweep{
		ID: "20250304-050600", Model: "sim-llama", Target: "http://user:secret@sim:8000/v1?key=k", Workload: "docchat",
		Version: "test", Modes: []string{"round_robin", "kv"}, Levels: []int{20, 40, 60, 80}, Runs: 2,
		SLA: 400 * time.Millisecond, AlternatedOrder: true,
	}
	p95 := map[string][]float64{"round_robin": {250, 380, 520, 700}, "kv": {150, 220, 330, 450}}
	hit := map[string]float64{"round_robin": 0.3, "kv": 0.8}
	for run := 1; run <= 2; run++ {
		for _, m := range s.Modes {
			for i, l := range s.Levels {
				jitter := float64(run-1) * 12 // run 2 a little slower
				p := synthPoint(run, m, l, p95[m][i]+jitter, hit[m])
				if run == 2 && m == "round_robin" && l == 60 {
					p.Coverage, p.Degraded = 0.9, true
					p.AgentNotes = []string{"agent-1 lost: heartbeat timeout"}
				}
				// Goodput at ttft:400: every request while the p95 is
				// under it, 90% of them above.
				p.SLO = "ttft:400"
				p.Window.Counters.Good = p.Window.Counters.Requests
				if p95[m][i]+jitter > 400 {
					p.Window.Counters.Good = p.Window.Counters.Requests * 9 / 10
				}
				s.Points = append(s.Points, p)
			}
		}
	}
	return s
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n%s", name, firstDiff(string(got), string(want)))
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + a + "\nwant: " + b
		}
	}
	return ""
}

// writeSweep writes s through a Writer into dir, as the sweep runner does.
func writeSweep(t *testing.T, dir string, s *Sweep) {
	t.Helper()
	w, err := NewWriter(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Points {
		if _, err := w.Add(&s.Points[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestGoldenSweep(t *testing.T) {
	dir := t.TempDir()
	s := goldenSweep()
	writeSweep(t, dir, s)
	out, err := Render(dir, s, Options{PNG: true})
	if err != nil {
		t.Fatal(err)
	}
	tsv, err := os.ReadFile(filepath.Join(dir, TSVName(s.ID)))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sweep.golden.tsv", tsv)
	md, err := os.ReadFile(out.Report)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.md", md)
	bj, err := os.ReadFile(out.Baseline)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "baseline.golden.json", bj)

	for _, want := range []string{
		"**kv supports 50% more concurrent sessions than round_robin at the same SLA (TTFT p95 ≤ 400 ms): 60 sessions for kv against 40 for round_robin.**",
		"Runs alternated the mode order (round_robin kv, kv round_robin) so drift does not favour one mode.",
		"Warning: run 2, round_robin at 60 sessions is marked degraded",
		"## Spread across runs",
		"## Run-to-run noise",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if strings.Contains(string(md), "secret") || strings.Contains(string(bj), "secret") {
		t.Error("credentials of the target URL leaked into the report")
	}
	if strings.Contains(string(md), "Percentiles were averaged") {
		t.Error("report says percentiles were averaged, but every point has histograms")
	}

	var b Baseline
	if err := json.Unmarshal(bj, &b); err != nil {
		t.Fatal(err)
	}
	kv40 := b.ByLevel["40"]["kv"]
	if kv40.TTFTP95Ms < 220 || kv40.TTFTP95Ms > 235 || kv40.Runs != 2 || b.Breakpoints["kv"] != 60 || b.Breakpoints["round_robin"] != 40 {
		t.Errorf("baseline.json kv@40 = %+v, breakpoints %v", kv40, b.Breakpoints)
	}

	// Percentiles across runs come from merged histograms, not averages.
	c := analyze(s).cell("kv", 60)
	merged := record.NewWindow(0, hdr.Default)
	for _, p := range s.Points {
		if p.Mode == "kv" && p.Level == 60 {
			if err := merged.Merge(p.Window); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := merged.Summary(record.TTFT).P95.Seconds(); !c.fromHist || c.pooled.TTFTP95 != want {
		t.Errorf("pooled p95 %v (from histograms %v), want merged %v", c.pooled.TTFTP95, c.fromHist, want)
	}

	checkCharts(t, out.Charts)

	// Per point: result.json and an interval log other tools read.
	pd := filepath.Join(dir, PointDir(2, "kv", 40))
	rj, err := os.ReadFile(filepath.Join(pd, resultFile))
	if err != nil || !bytes.Contains(rj, []byte(`"p99_ttft_ms"`)) || !bytes.Contains(rj, []byte(`"label": "kv"`)) {
		t.Errorf("result.json: %v %.200s", err, rj)
	}
	checkHdrLog(t, filepath.Join(pd, histFile), s.Points, 2, "kv", 40)
}

// checkCharts checks that every chart is a non-empty file, SVGs well-formed
// XML with an <svg> root, PNGs with the PNG signature.
func checkCharts(t *testing.T, charts []string) {
	t.Helper()
	if len(charts) != 6 {
		t.Fatalf("charts %v, want 3 SVG + 3 PNG", charts)
	}
	for _, c := range charts {
		b, err := os.ReadFile(c)
		if err != nil || len(b) < 1000 {
			t.Fatalf("chart %s: %v, %d bytes", c, err, len(b))
		}
		switch filepath.Ext(c) {
		case ".svg":
			d := xml.NewDecoder(bytes.NewReader(b))
			root := ""
			for {
				tok, err := d.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("chart %s is not valid XML: %v", c, err)
				}
				if se, ok := tok.(xml.StartElement); ok && root == "" {
					root = se.Name.Local
				}
			}
			if root != "svg" {
				t.Errorf("chart %s root element %q", c, root)
			}
			if !bytes.Contains(b, []byte("Concurrency (sessions)")) {
				t.Errorf("chart %s lacks its axis label", c)
			}
		case ".png":
			if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
				t.Errorf("chart %s is not a PNG", c)
			}
		}
	}
	if dst := os.Getenv("FLEETBENCH_CHART_DIR"); dst != "" {
		for _, c := range charts {
			b, _ := os.ReadFile(c)
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(c)), b, 0o644)
		}
	}
}

// checkHdrLog reads the log with hdrhistogram-go's own reader and compares
// the ttft interval with the point's histogram.
func checkHdrLog(t *testing.T, path string, ps []Point, run int, mode string, level int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := hdrhistogram.NewHistogramLogReader(f)
	tags := map[string]*hdrhistogram.Histogram{}
	for {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			break
		}
		tags[h.Tag()] = h
	}
	var want *record.Window
	for _, p := range ps {
		if p.Run == run && p.Mode == mode && p.Level == level {
			want = p.Window
		}
	}
	got := tags["ttft"]
	if got == nil || want == nil {
		t.Fatalf("log tags %v, no ttft", len(tags))
	}
	if got.TotalCount() != want.Hist[record.TTFT].Count() || got.ValueAtQuantile(95) != want.Hist[record.TTFT].Unwrap().ValueAtQuantile(95) {
		t.Errorf("log ttft count %d p95 %d, want %d %d", got.TotalCount(), got.ValueAtQuantile(95),
			want.Hist[record.TTFT].Count(), want.Hist[record.TTFT].Unwrap().ValueAtQuantile(95))
	}
	if tags["turn_2_ttft"] == nil || tags["e2e"] == nil || len(tags) != int(record.NumMetrics)+4 {
		t.Errorf("log has %d tags, want every metric and 4 turns", len(tags))
	}
}

func TestLoadDirRestoresWindows(t *testing.T) {
	dir := t.TempDir()
	s := goldenSweep()
	s.Points[0].Window.Hist[record.E2E].RecordValue(-5) // a clamped value survives
	writeSweep(t, dir, s)
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Points) != len(s.Points) || got.SLA != s.SLA || !got.AlternatedOrder || got.ID != s.ID {
		t.Fatalf("loaded %d points, SLA %v, alternated %v, id %q", len(got.Points), got.SLA, got.AlternatedOrder, got.ID)
	}
	for _, want := range s.Points {
		found := false
		for _, p := range got.Points {
			if p.Run == want.Run && p.Mode == want.Mode && p.Level == want.Level {
				found = true
				if p.Window == nil || !p.Window.Equal(want.Window) {
					t.Errorf("run %d %s %d: window not restored exactly", p.Run, p.Mode, p.Level)
				}
				if !p.MeasureEnd.Equal(want.MeasureEnd) || p.Coverage != want.Coverage || p.Degraded != want.Degraded {
					t.Errorf("run %d %s %d: facts %v %v %v", p.Run, p.Mode, p.Level, p.MeasureEnd, p.Coverage, p.Degraded)
				}
			}
		}
		if !found {
			t.Errorf("run %d %s %d not loaded", want.Run, want.Mode, want.Level)
		}
	}
	// Re-rendering the loaded directory gives the same report.
	a, b := t.TempDir(), t.TempDir()
	if _, err := Render(a, s, Options{}); err != nil {
		t.Fatal(err)
	}
	got.sources = nil
	if _, err := Render(b, got, Options{}); err != nil {
		t.Fatal(err)
	}
	ma, _ := os.ReadFile(filepath.Join(a, ReportFile))
	mb, _ := os.ReadFile(filepath.Join(b, ReportFile))
	if !bytes.Equal(ma, mb) {
		t.Errorf("re-rendered report differs:\n%s", firstDiff(string(mb), string(ma)))
	}
}

// TestLoadAveragesTSVs re-renders three TSVs (three "days") of one run
// each: rows of one (mode, level) become three runs, averaged.
func TestLoadAveragesTSVs(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for day, off := range []float64{0, 30, 60} {
		var rows []Row
		for i, l := range []int{20, 40} {
			rows = append(rows,
				Row{Mode: "round_robin", Concurrency: l, Run: 1, TTFTP50: 0.1, TTFTP95: 0.3 + 0.1*float64(i) + off/1000, HitRate: 0.3, OutputTPS: 100, TOPS: 100},
				Row{Mode: "kv", Concurrency: l, Run: 1, TTFTP50: 0.05, TTFTP95: 0.2 + off/1000, HitRate: 0.8, OutputTPS: 120, TOPS: 120})
		}
		p := filepath.Join(dir, "day"+strconv.Itoa(day)+".tsv")
		var b bytes.Buffer
		if err := WriteTSV(&b, rows); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	s, err := Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	a := analyze(s)
	c := a.cell("round_robin", 40)
	if len(c.runs) != 3 || c.fromHist {
		t.Fatalf("round_robin@40: %d runs, from histograms %v", len(c.runs), c.fromHist)
	}
	if want := 0.43; abs(c.pooled.TTFTP95-want) > 1e-9 {
		t.Errorf("averaged p95 %v, want %v", c.pooled.TTFTP95, want)
	}
	sp := a.spreadOf("round_robin", 40, func(r *Row) float64 { return r.TTFTP95 })
	if sp.N != 3 || abs(sp.HalfCI-4.303*0.03/1.7320508075688772) > 1e-9 {
		t.Errorf("spread %+v", sp)
	}
	out := t.TempDir()
	r, err := Render(out, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(r.Report)
	for _, want := range []string{"Percentiles were averaged across files because only TSVs were given", "day0.tsv", "| kv | 40 | 3 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// kv fails nowhere, round_robin at 40 (0.43 s): 100% more.
	if r.Outcome.Primary.Gain != 1 {
		t.Errorf("gain %v, want 1", r.Outcome.Primary.Gain)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestHistogramLogRoundTrip(t *testing.T) {
	w := synthWindow(t0, 300*time.Millisecond, 0.5, 3)
	var b bytes.Buffer
	if err := WriteHistogramLog(&b, w, t0, t0.Add(time.Minute), "test"); err != nil {
		t.Fatal(err)
	}
	hs, err := ReadHistogramLog(&b, hdr.Default)
	if err != nil {
		t.Fatal(err)
	}
	for m := range record.NumMetrics {
		if !hs[m.String()].Equal(w.Hist[m]) {
			t.Errorf("%s differs after the round trip", m)
		}
	}
	if _, err := ReadHistogramLog(strings.NewReader("Tag=x,1,2\n"), hdr.Default); !errors.Is(err, ErrHistogramLog) {
		t.Errorf("malformed log: %v", err)
	}
}
