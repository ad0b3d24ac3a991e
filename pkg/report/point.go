package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// File names inside a point's directory.
const (
	pointFile     = "point.json"
	histFile      = "histograms.hlog"
	snapshotsFile = "snapshots.hlog"
	resultFile    = "result.json"
	pointsDir     = "points"
	pointFormat   = "fleetbench-point-v1"
)

// PointDir returns the directory, relative to a sweep's output directory,
// that holds the files of (run, mode, level): points/run1-kv-c40. Characters
// of the mode outside [A-Za-z0-9_.] are replaced by '_'.
func PointDir(run int, mode string, level int) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.':
			return r
		}
		return '_'
	}, mode)
	return filepath.Join(pointsDir, fmt.Sprintf("run%d-%s-c%d", run, safe, level))
}

// pointJSON is point.json: a Point's facts and the parts of its Window an
// interval log does not carry (counters, clamp counts, per-turn counts,
// time span). With histograms.hlog it rebuilds the Window exactly.
type pointJSON struct {
	Format       string                       `json:"format"`
	Run          int                          `json:"run"`
	Mode         string                       `json:"mode"`
	Level        int                          `json:"level"`
	RPS          float64                      `json:"rps"`
	MeasureStart time.Time                    `json:"measure_start"`
	MeasureEnd   time.Time                    `json:"measure_end"`
	Coverage     float64                      `json:"coverage"`
	Degraded     bool                         `json:"degraded"`
	StartSkewNS  int64                        `json:"start_skew_ns"`
	Agents       int                          `json:"agents"`
	HDR          hdr.Config                   `json:"hdr"`
	WindowID     uint32                       `json:"window_id"`
	FirstSend    time.Time                    `json:"first_send"`
	LastEnd      time.Time                    `json:"last_end"`
	Counters     record.Counters              `json:"counters"`
	Clamped      map[string]int64             `json:"clamped,omitempty"`
	Turns        map[string]turnJSON          `json:"turns"`
	Errors       []errorJSON                  `json:"errors,omitempty"`
	SLO          string                       `json:"slo,omitempty"`
	Workers      map[string]record.WorkerStat `json:"workers,omitempty"`
	AgentNotes   []string                     `json:"agent_notes,omitempty"`
	Server       *servermetrics.Window        `json:"server,omitempty"`
}

// errorJSON is one of a window's distinct failures (record.ErrorStat).
type errorJSON struct {
	Class   string    `json:"class"`
	Message string    `json:"message"`
	Example string    `json:"example,omitempty"`
	Count   int64     `json:"count"`
	First   time.Time `json:"first"`
}

type turnJSON struct {
	Requests          int64 `json:"requests"`
	PromptTokens      int64 `json:"prompt_tokens"`
	CachedTokens      int64 `json:"cached_tokens"`
	RequestsWithCache int64 `json:"requests_with_cache"`
	TTFTClamped       int64 `json:"ttft_clamped,omitempty"`
}

// WritePoint writes p's point.json and histogram logs into dir (created
// if needed), the form `fleetbench report DIR` reads back exactly: `run`
// leaves one in its output directory so runs can be compared in a report.
// p.Window is required.
func WritePoint(dir string, p *Point, comment string) error {
	if p.Window == nil {
		return fmt.Errorf("write point: %w: no window", ErrInvalidSweep)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write point: %w", err)
	}
	return writePointFiles(dir, p, comment)
}

// writePointFiles writes point.json and the interval logs of p into dir.
func writePointFiles(dir string, p *Point, comment string) error {
	w := p.Window
	pj := pointJSON{
		Format: pointFormat, Run: p.Run, Mode: p.Mode, Level: p.Level, RPS: p.RPS,
		MeasureStart: p.MeasureStart.UTC(), MeasureEnd: p.MeasureEnd.UTC(), Coverage: p.Coverage,
		Degraded: p.Degraded, StartSkewNS: int64(p.StartSkew), Agents: p.Agents, SLO: p.SLO, AgentNotes: p.AgentNotes, Server: p.Server,
		HDR: w.Config, WindowID: w.ID, FirstSend: w.FirstSend.UTC(), LastEnd: w.LastEnd.UTC(),
		Counters: w.Counters, Clamped: map[string]int64{}, Turns: map[string]turnJSON{},
	}
	for m, n := range w.Clamped() {
		if n > 0 {
			pj.Clamped[record.Metric(m).String()] = n
		}
	}
	for i, t := range w.Turns {
		tj := turnJSON{Requests: t.Requests, PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, RequestsWithCache: t.RequestsWithCache}
		if t.TTFT != nil {
			tj.TTFTClamped = t.TTFT.Clamped()
		}
		pj.Turns[strconv.Itoa(i)] = tj
	}
	for _, e := range w.TopErrors(0) {
		pj.Errors = append(pj.Errors, errorJSON{Class: string(e.Class), Message: e.Message, Example: e.Example, Count: e.Count, First: e.First.UTC()})
	}
	for name, s := range p.Window.Workers {
		if pj.Workers == nil {
			pj.Workers = map[string]record.WorkerStat{}
		}
		pj.Workers[name] = *s
	}
	b, err := json.MarshalIndent(&pj, "", "  ")
	if err != nil {
		return fmt.Errorf("encode point: %w", err)
	}
	var hl bytes.Buffer
	if err := WriteHistogramLog(&hl, w, p.MeasureStart, p.MeasureEnd, comment); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, histFile), hl.Bytes()); err != nil {
		return err
	}
	if len(p.Snapshots) > 0 {
		var sl bytes.Buffer
		if err := WriteSnapshotLog(&sl, p.Snapshots, comment+" snapshots"); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, snapshotsFile), sl.Bytes()); err != nil {
			return err
		}
	}
	// point.json last: its presence marks the directory complete.
	return writeFileAtomic(filepath.Join(dir, pointFile), append(b, '\n'))
}

// readPoint rebuilds the Point written by writePointFiles in dir.
func readPoint(dir string) (*Point, error) {
	b, err := os.ReadFile(filepath.Join(dir, pointFile))
	if err != nil {
		return nil, fmt.Errorf("read point: %w", err)
	}
	var pj pointJSON
	if err := json.Unmarshal(b, &pj); err != nil {
		return nil, fmt.Errorf("read point %s: %w", dir, err)
	}
	if pj.Format != pointFormat {
		return nil, fmt.Errorf("read point %s: format %q, want %q", dir, pj.Format, pointFormat)
	}
	if err := pj.HDR.Validate(); err != nil {
		return nil, fmt.Errorf("read point %s: %w", dir, err)
	}
	f, err := os.Open(filepath.Join(dir, histFile))
	if err != nil {
		return nil, fmt.Errorf("read point: %w", err)
	}
	defer f.Close()
	hists, err := ReadHistogramLog(f, pj.HDR)
	if err != nil {
		return nil, fmt.Errorf("read point %s: %w", dir, err)
	}
	w := record.NewWindow(pj.WindowID, pj.HDR)
	for m := range record.NumMetrics {
		if h := hists[m.String()]; h != nil {
			h.SetClamped(pj.Clamped[m.String()])
			w.Hist[m] = h
		}
	}
	for k, tj := range pj.Turns {
		i, err := strconv.Atoi(k)
		if err != nil || i < 1 || i > record.MaxTurnIndex {
			return nil, fmt.Errorf("read point %s: turn %q: %w", dir, k, errors.New("not a turn index"))
		}
		t := &record.TurnStats{TTFT: pj.HDR.New(), Requests: tj.Requests, PromptTokens: tj.PromptTokens,
			CachedTokens: tj.CachedTokens, RequestsWithCache: tj.RequestsWithCache}
		if h := hists[turnTag(i)]; h != nil {
			t.TTFT = h
		}
		t.TTFT.SetClamped(tj.TTFTClamped)
		w.Turns[i] = t
	}
	w.Counters = pj.Counters
	w.FirstSend, w.LastEnd = pj.FirstSend, pj.LastEnd
	for _, e := range pj.Errors {
		w.AddErrors([]record.ErrorStat{{Class: client.Class(e.Class), Message: e.Message, Example: e.Example, Count: e.Count, First: e.First}})
	}
	w.AddWorkers(pj.Workers)
	return &Point{
		Run: pj.Run, Mode: pj.Mode, Level: pj.Level, RPS: pj.RPS, Window: w,
		MeasureStart: pj.MeasureStart, MeasureEnd: pj.MeasureEnd, Coverage: pj.Coverage,
		Degraded: pj.Degraded, StartSkew: time.Duration(pj.StartSkewNS), Agents: pj.Agents,
		SLO: pj.SLO, AgentNotes: pj.AgentNotes, Server: pj.Server,
	}, nil
}

// writeFileAtomic writes data to a temporary file in path's directory,
// syncs it and renames it over path.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}
