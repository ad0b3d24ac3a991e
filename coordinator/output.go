package coordinator

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	Turns        []TurnFile       `json:"turns,omitempty"`
	FirstSend    time.Time        `json:"first_send,omitzero"`
	LastEnd      time.Time        `json:"last_end,omitzero"`
	LateRequests int64            `json:"late_requests"`
	Late         *record.Counters `json:"late_counters,omitempty"`
	LateMetrics  []MetricFile     `json:"late_metrics,omitempty"`
	LateTurns    []TurnFile       `json:"late_turns,omitempty"`
	LateFirst    time.Time        `json:"late_first_send,omitzero"`
	LateLast     time.Time        `json:"late_last_end,omitzero"`
}

// TurnFile is one turn index's data in a WindowFile.
type TurnFile struct {
	Turn              int    `json:"turn"`
	Requests          int64  `json:"requests"`
	PromptTokens      int64  `json:"prompt_tokens"`
	CachedTokens      int64  `json:"cached_tokens"`
	RequestsWithCache int64  `json:"requests_with_cache"`
	TTFTClamped       int64  `json:"ttft_clamped,omitempty"`
	TTFT              string `json:"ttft,omitempty"`
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
		if h == nil || h.Count() == 0 && h.Clamped() == 0 {
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

func turnFiles(w *record.Window) ([]TurnFile, error) {
	out := make([]TurnFile, 0, len(w.Turns))
	for i, t := range w.Turns {
		f := TurnFile{Turn: i, Requests: t.Requests, PromptTokens: t.PromptTokens,
			CachedTokens: t.CachedTokens, RequestsWithCache: t.RequestsWithCache}
		if t.TTFT != nil && (t.TTFT.Count() > 0 || t.TTFT.Clamped() > 0) {
			b, err := t.TTFT.Encode()
			if err != nil {
				return nil, err
			}
			f.TTFT, f.TTFTClamped = string(b), t.TTFT.Clamped()
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b TurnFile) int { return a.Turn - b.Turn })
	return out, nil
}

// ReadWindowFile reads a window-<id>.json written by a coordinator.
func ReadWindowFile(path string) (*WindowFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read window file: %w", err)
	}
	var f WindowFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("read window file %s: %w", path, err)
	}
	return &f, nil
}

// Data rebuilds the window's data and its late samples (nil when none)
// from the file's histograms, exactly as the coordinator merged them. cfg
// must be the geometry the file names.
func (f *WindowFile) Data(cfg hdr.Config) (data, late *record.Window, err error) {
	if f.Histogram != cfg.Fingerprint() {
		return nil, nil, fmt.Errorf("rebuild window %d: file histograms are %s, not %s: %w", f.ID, f.Histogram, cfg.Fingerprint(), hdr.ErrConfigMismatch)
	}
	data, err = rebuild(f.ID, cfg, f.Counters, f.Metrics, f.Turns, f.FirstSend, f.LastEnd)
	if err != nil || f.Late == nil {
		return data, nil, err
	}
	late, err = rebuild(f.ID, cfg, *f.Late, f.LateMetrics, f.LateTurns, f.LateFirst, f.LateLast)
	return data, late, err
}

func rebuild(id uint32, cfg hdr.Config, c record.Counters, ms []MetricFile, ts []TurnFile, first, last time.Time) (*record.Window, error) {
	w := record.NewWindow(id, cfg)
	w.Counters, w.FirstSend, w.LastEnd = c, first, last
	byName := make(map[string]record.Metric, record.NumMetrics)
	for m := range record.NumMetrics {
		byName[m.String()] = m
	}
	for _, mf := range ms {
		m, ok := byName[mf.Name]
		if !ok {
			return nil, fmt.Errorf("rebuild window %d: unknown metric %q", id, mf.Name)
		}
		h, err := decodeHist(cfg, []byte(mf.Histogram), mf.Clamped)
		if err != nil {
			return nil, fmt.Errorf("rebuild window %d %s: %w", id, mf.Name, err)
		}
		w.Hist[m] = h
	}
	for _, tf := range ts {
		h, err := decodeHist(cfg, []byte(tf.TTFT), tf.TTFTClamped)
		if err != nil {
			return nil, fmt.Errorf("rebuild window %d turn %d: %w", id, tf.Turn, err)
		}
		w.Turns[tf.Turn] = &record.TurnStats{TTFT: h, Requests: tf.Requests, PromptTokens: tf.PromptTokens,
			CachedTokens: tf.CachedTokens, RequestsWithCache: tf.RequestsWithCache}
	}
	return w, nil
}

func (wr *writer) write(w *window) error {
	r := w.result()
	f := WindowFile{
		ID: r.ID, Stage: r.Stage, Kind: r.Kind.String(), Level: r.Level, Mode: r.Mode,
		Start: r.Start, End: r.End, ClosedBy: r.ClosedBy, Degraded: r.Degraded, Rerun: r.Rerun,
		Coverage: r.Coverage, Histogram: w.cfg.Fingerprint(), Counters: r.Data.Counters, LateRequests: r.LateRequests,
		FirstSend: r.Data.FirstSend, LastEnd: r.Data.LastEnd,
	}
	var err error
	if f.Metrics, err = metricFiles(r.Data); err != nil {
		return fmt.Errorf("write window %d: %w", w.id, err)
	}
	if f.Turns, err = turnFiles(r.Data); err != nil {
		return fmt.Errorf("write window %d: %w", w.id, err)
	}
	if r.Late != nil {
		f.Late, f.LateFirst, f.LateLast = &r.Late.Counters, r.Late.FirstSend, r.Late.LastEnd
		if f.LateMetrics, err = metricFiles(r.Late); err != nil {
			return fmt.Errorf("write window %d: %w", w.id, err)
		}
		if f.LateTurns, err = turnFiles(r.Late); err != nil {
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

// decodeHist decodes one of a window file's histograms (V2 compressed,
// base64) in sparse form (see hdr.DecodeSparse) and restores its clamp
// count. An empty one is nil, which a record.Window reads as empty.
func decodeHist(cfg hdr.Config, b []byte, clamped int64) (*hdr.Histogram, error) {
	if len(b) == 0 && clamped == 0 {
		return nil, nil
	}
	if len(b) == 0 {
		h := cfg.New()
		h.SetClamped(clamped)
		return h, nil
	}
	h, err := hdr.DecodeSparse(cfg, b)
	if err != nil {
		return nil, err
	}
	h.SetClamped(clamped)
	return h, nil
}
