package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/result"
)

// File names of a sweep's output directory (besides the TSV, see TSVName,
// and the point directories, see PointDir).
const (
	SweepFile    = "sweep.json"
	ReportFile   = "report.md"
	BaselineFile = "baseline.json"
)

// sweepJSON is sweep.json: the facts of a sweep, so `fleetbench report DIR`
// re-renders with the sweep's own SLA and modes.
type sweepJSON struct {
	ID              string   `json:"id"`
	Model           string   `json:"model,omitempty"`
	Target          string   `json:"target,omitempty"`
	Workload        string   `json:"workload,omitempty"`
	Version         string   `json:"version,omitempty"`
	Endpoint        string   `json:"endpoint,omitempty"`
	Modes           []string `json:"modes"`
	Baseline        string   `json:"baseline"`
	Candidate       string   `json:"candidate"`
	Levels          []int    `json:"levels"`
	Runs            int      `json:"runs"`
	SLAMs           float64  `json:"sla_ms"`
	FallbackSLAMs   float64  `json:"fallback_sla_ms"`
	AlternatedOrder bool     `json:"alternated_order"`
}

func toSweepJSON(s *Sweep) sweepJSON {
	s = s.withDefaults()
	return sweepJSON{
		ID: s.ID, Model: s.Model, Target: client.RedactURL(s.Target), Workload: s.Workload, Version: s.Version, Endpoint: s.Endpoint,
		Modes: s.Modes, Baseline: s.Baseline, Candidate: s.Candidate, Levels: s.Levels, Runs: s.Runs,
		SLAMs: ms(s.SLA), FallbackSLAMs: ms(s.FallbackSLA), AlternatedOrder: s.AlternatedOrder,
	}
}

func (j *sweepJSON) sweep() *Sweep {
	return &Sweep{
		ID: j.ID, Model: j.Model, Target: j.Target, Workload: j.Workload, Version: j.Version, Endpoint: j.Endpoint,
		Modes: j.Modes, Baseline: j.Baseline, Candidate: j.Candidate, Levels: j.Levels, Runs: j.Runs,
		SLA: time.Duration(j.SLAMs * float64(time.Millisecond)), FallbackSLA: time.Duration(j.FallbackSLAMs * float64(time.Millisecond)),
		AlternatedOrder: j.AlternatedOrder,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Writer writes a sweep's output directory as the sweep goes: sweep.json
// at once, then per finished level the point's files and its TSV row. A
// Writer must be used by one goroutine at a time.
type Writer struct {
	dir   string
	sweep *Sweep
	tsv   *Appender
}

// NewWriter creates dir (if needed), writes sweep.json from s (its Points
// are ignored) and opens the sweep TSV for appending, creating it with its
// header. For a resumed sweep (same dir and s.ID) the TSV's complete rows
// are kept. s.ID must be set.
func NewWriter(dir string, s *Sweep) (*Writer, error) {
	if s.ID == "" {
		return nil, fmt.Errorf("create sweep output: %w: empty sweep id", ErrInvalidSweep)
	}
	b, err := json.MarshalIndent(toSweepJSON(s), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode sweep: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, SweepFile), append(b, '\n')); err != nil {
		return nil, err
	}
	a, err := OpenAppender(filepath.Join(dir, TSVName(s.ID)))
	if err != nil {
		return nil, err
	}
	return &Writer{dir: dir, sweep: s, tsv: a}, nil
}

// Add records one finished (run, mode, level): it writes the point's
// directory (histograms.hlog, snapshots.hlog when p has snapshots,
// point.json, result.json), then appends and syncs its TSV row, so a row in
// the TSV always has its files. It returns the row written.
func (w *Writer) Add(p *Point) (Row, error) {
	if err := p.validate(); err != nil {
		return Row{}, fmt.Errorf("add point: %w", err)
	}
	if p.Window == nil {
		return Row{}, fmt.Errorf("add point: %w: run %d mode %s level %d has no window", ErrInvalidSweep, p.Run, p.Mode, p.Level)
	}
	dir := filepath.Join(w.dir, PointDir(p.Run, p.Mode, p.Level))
	comment := fmt.Sprintf("[fleetbench sweep %s run %d mode %s level %d]", w.sweep.ID, p.Run, p.Mode, p.Level)
	if err := writePointFiles(dir, p, comment); err != nil {
		return Row{}, err
	}
	if err := writeResult(filepath.Join(dir, resultFile), w.sweep, p); err != nil {
		return Row{}, err
	}
	row := RowOf(p)
	if err := w.tsv.Append(&row); err != nil {
		return Row{}, err
	}
	return row, nil
}

// writeResult writes the point's vLLM-style result.json.
func writeResult(path string, s *Sweep, p *Point) error {
	d := p.MeasureEnd.Sub(p.MeasureStart)
	if d <= 0 {
		d = p.Window.LastEnd.Sub(p.Window.FirstSend)
	}
	if d <= 0 {
		d = time.Nanosecond // an empty window: rates of 0 over any length
	}
	load := result.Load{
		Target: s.Target, Model: s.Model, Workload: s.Workload, Version: s.Version, Label: p.Mode,
		Backend:        result.BackendFor(s.Endpoint),
		MaxConcurrency: p.Level, RequestRate: p.RPS, WorkerHeader: s.WorkerHeader,
	}
	sum, err := result.New(p.Window, load.Facts(p.MeasureStart, p.MeasureEnd, d))
	if err != nil {
		return fmt.Errorf("write result run %d mode %s level %d: %w", p.Run, p.Mode, p.Level, err)
	}
	return result.WriteJSONFile(path, sum)
}

// TSVPath returns the path of the sweep TSV.
func (w *Writer) TSVPath() string { return w.tsv.Path() }

// Close closes the TSV.
func (w *Writer) Close() error { return w.tsv.Close() }

// Options tune Render.
type Options struct {
	// PNG also writes each chart as PNG next to its SVG.
	PNG bool
}

// Rendered lists what Render wrote and the SLA outcome.
type Rendered struct {
	Report, Baseline string
	Charts           []string
	Outcome          *Outcome
}

// Render writes report.md, baseline.json and the charts of s into dir. It
// may be called after every level (each file is replaced atomically) and
// again at the end.
func Render(dir string, s *Sweep, o Options) (*Rendered, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	a := analyze(s)
	out := &Rendered{Report: filepath.Join(dir, ReportFile), Baseline: filepath.Join(dir, BaselineFile), Outcome: a.outcome()}
	charts, err := a.writeCharts(dir, o.PNG)
	if err != nil {
		return nil, err
	}
	out.Charts = charts
	var doc md
	a.writeMarkdown(&doc, charts, dir)
	if err := writeFileAtomic(out.Report, doc.Bytes()); err != nil {
		return nil, err
	}
	var bj bytes.Buffer
	if err := a.writeBaseline(&bj); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(out.Baseline, bj.Bytes()); err != nil {
		return nil, err
	}
	return out, nil
}
