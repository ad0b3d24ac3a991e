package coordinator

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// writer writes each closed window to dir/window-<id>.json atomically
// (temporary file, fsync, rename), so a crash loses at most open windows.
type writer struct {
	dir    string
	logger hclog.Logger
}

// WindowFile is the JSON form of a closed window: summaries for people and
// the encoded histograms for exact re-merging.
type WindowFile struct {
	ID           uint32           `json:"id"`
	Stage        int              `json:"stage"`
	Kind         string           `json:"kind"`
	Level        int              `json:"level"`
	Mode         string           `json:"mode,omitempty"`
	Start        time.Time        `json:"start"`
	End          time.Time        `json:"end"`
	ClosedBy     string           `json:"closed_by"`
	Degraded     bool             `json:"degraded"`
	Rerun        bool             `json:"rerun"`
	Coverage     []Coverage       `json:"coverage"`
	Histogram    string           `json:"histogram_config"`
	Counters     record.Counters  `json:"counters"`
	Metrics      []MetricFile     `json:"metrics"`
	LateRequests int64            `json:"late_requests"`
	Late         *record.Counters `json:"late_counters,omitempty"`
	LateMetrics  []MetricFile     `json:"late_metrics,omitempty"`
}

// MetricFile is one metric's summary and histogram (HdrHistogram V2
// compressed, base64).
type MetricFile struct {
	Name      string      `json:"name"`
	Summary   hdr.Summary `json:"summary"`
	Clamped   int64       `json:"clamped"`
	Histogram string      `json:"histogram"`
}

func metricFiles(w *record.Window) ([]MetricFile, error) {
	var out []MetricFile
	for m := range record.NumMetrics {
		h := w.Hist[m]
		if h == nil || h.Count() == 0 {
			continue
		}
		b, err := h.Encode()
		if err != nil {
			return nil, err
		}
		out = append(out, MetricFile{Name: m.String(), Summary: h.Summary(), Clamped: h.Clamped(), Histogram: string(b)})
	}
	return out, nil
}

func (wr *writer) write(w *window) error {
	r := w.result()
	f := WindowFile{
		ID: r.ID, Stage: r.Stage, Kind: r.Kind.String(), Level: r.Level, Mode: r.Mode,
		Start: r.Start, End: r.End, ClosedBy: r.ClosedBy, Degraded: r.Degraded, Rerun: r.Rerun,
		Coverage: r.Coverage, Histogram: w.cfg.Fingerprint(), Counters: r.Data.Counters, LateRequests: r.LateRequests,
	}
	var err error
	if f.Metrics, err = metricFiles(r.Data); err != nil {
		return fmt.Errorf("write window %d: %w", w.id, err)
	}
	if r.Late != nil {
		f.Late = &r.Late.Counters
		if f.LateMetrics, err = metricFiles(r.Late); err != nil {
			return fmt.Errorf("write window %d: %w", w.id, err)
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("write window %d: %w", w.id, err)
	}
	return writeAtomic(filepath.Join(wr.dir, fmt.Sprintf("window-%d.json", w.id)), append(b, '\n'))
}

// writeAtomic replaces path with b so readers see the old or the new file,
// never a torn one.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}
