package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// SpecFile is the spec a sweep keeps in its output directory, in the form
// sweep.Load reads, so `fleetbench sweep --resume DIR` needs no other
// input.
const SpecFile = "sweep.yaml"

// IDLayout is the layout of sweep ids (the TSV's name suffix).
const IDLayout = "20060102-150405"

// ErrNotEmpty is returned by CheckFresh for an output directory that
// already holds a sweep.
var ErrNotEmpty = errors.New("output directory already holds a sweep")

// NewID returns the id of a sweep started at t, in UTC.
func NewID(t time.Time) string { return t.UTC().Format(IDLayout) }

// CheckFresh returns ErrNotEmpty (wrapped, naming the sweep) when dir
// already holds a sweep, so a new sweep never mixes its rows with an old
// one's; a missing or unrelated directory is fine.
func CheckFresh(dir string) error {
	id, err := ReadID(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%w: %s holds sweep %s (resume it with --resume %s, or choose another output directory)", ErrNotEmpty, dir, id, dir)
}

// ReadID returns the id of the sweep in dir, from its sweep.json. The
// error wraps fs.ErrNotExist when dir holds no sweep.
func ReadID(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, report.SweepFile))
	if err != nil {
		return "", fmt.Errorf("read sweep id: %w", err)
	}
	var j struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return "", fmt.Errorf("read sweep id from %s: %w", filepath.Join(dir, report.SweepFile), err)
	}
	if j.ID == "" {
		return "", fmt.Errorf("read sweep id from %s: it has none", filepath.Join(dir, report.SweepFile))
	}
	return j.ID, nil
}

// Done returns the points the sweep id in dir has measured: the keys of
// its TSV's rows. A TSV not yet created means none.
func Done(dir, id string) (map[sweep.Key]bool, error) {
	rows, err := report.ReadTSV(filepath.Join(dir, report.TSVName(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return map[sweep.Key]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read done points: %w", err)
	}
	done := make(map[sweep.Key]bool, len(rows))
	for _, r := range rows {
		done[sweep.Key{Run: r.Run, Mode: r.Mode, Level: r.Concurrency}] = true
	}
	return done, nil
}

// WriteSpec keeps spec in dir as SpecFile.
func WriteSpec(dir string, spec *sweep.Spec) error {
	// A valid spec has no user info in its target (Validate rejects it);
	// one that was not validated must not leave a password on disk either.
	if u, err := url.Parse(spec.Target); err == nil && u.User != nil {
		s := *spec
		u.User = nil
		s.Target = u.String()
		spec = &s
	}
	b, err := spec.Marshal()
	if err != nil {
		return fmt.Errorf("encode sweep spec: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SpecFile), b, 0o644); err != nil {
		return fmt.Errorf("write sweep spec: %w", err)
	}
	return nil
}

// Facts returns the report facts of spec for sweep id; workload names the
// conversation source and version is fleetbench's.
func Facts(spec *sweep.Spec, id, workload, version string) *report.Sweep {
	base, cand := spec.Compared()
	return &report.Sweep{
		ID: id, Model: spec.Model, Target: spec.Target, Workload: workload, Version: version, Endpoint: spec.Endpoint,
		Modes: spec.ModeNames(), Baseline: base, Candidate: cand, Levels: append([]int(nil), spec.Levels...),
		Runs: spec.Runs, SLA: spec.SLA.D(), FallbackSLA: spec.FallbackSLA.D(), AlternatedOrder: spec.Runs > 1,
		WorkerHeader: spec.WorkerHeader,
	}
}

// Render writes the report of the sweep in dir from every point it holds
// (measured now or before a resume), with the facts of facts, and returns
// what it wrote.
func Render(dir string, facts *report.Sweep) (*report.Rendered, error) {
	loaded, err := report.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("render report: %w", err)
	}
	s := *facts
	s.Points = loaded.Points
	return report.Render(dir, &s, report.Options{})
}
