package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// turnTagPrefix tags the per-turn TTFT histograms: "turn_3_ttft".
const turnTagPrefix = "turn_"

// turnTag returns the interval log tag of turn index i's TTFT histogram.
func turnTag(i int) string { return fmt.Sprintf("%s%d_ttft", turnTagPrefix, i) }

// WriteHistogramLog writes w's histograms to out as an HdrHistogram
// interval log (format version 1.3, as hdrhistogram-go's HistogramLogWriter
// writes it): one interval per metric, tagged with the metric's name (ttft,
// itl, e2e, ...), then one per turn index tagged turn_N_ttft, every
// interval spanning start..end with absolute time stamps. Values are
// microseconds, so HdrHistogram's tools need an output value unit ratio of
// 1000 to print milliseconds, and the interval max column, which the writer
// scales by 1e6, reads in seconds.
func WriteHistogramLog(out io.Writer, w *record.Window, start, end time.Time, comment string) error {
	var b bytes.Buffer
	lw := hdrhistogram.NewHistogramLogWriter(&b)
	_ = lw.OutputLogFormatVersion()
	if comment != "" {
		_ = lw.OutputComment(strings.ReplaceAll(comment, "\n", " "))
	}
	_ = lw.OutputComment("[values in microseconds; hdr " + w.Config.Fingerprint() + "]")
	_ = lw.OutputStartTime(start.UnixMilli())
	_ = lw.OutputLegend()
	if err := writeIntervals(lw, w, start, end); err != nil {
		return err
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write histogram log: %w", err)
	}
	return nil
}

// writeIntervals writes w's histograms as intervals start..end.
func writeIntervals(lw *hdrhistogram.HistogramLogWriter, w *record.Window, start, end time.Time) error {
	put := func(tag string, h *hdr.Histogram) error {
		if h == nil {
			h = w.Config.New()
		}
		// The log writer reads the tag and time stamps from the histogram;
		// stamp a copy so w is not changed.
		hh := h.Unwrap().Clone()
		hh.SetTag(tag)
		hh.SetStartTimeMs(start.UnixMilli())
		hh.SetEndTimeMs(end.UnixMilli())
		if err := lw.OutputIntervalHistogram(hh); err != nil {
			return fmt.Errorf("write histogram log %s: %w", tag, err)
		}
		return nil
	}
	for m := range record.NumMetrics {
		if err := put(m.String(), w.Hist[m]); err != nil {
			return err
		}
	}
	idx := make([]int, 0, len(w.Turns))
	for i := range w.Turns {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		if err := put(turnTag(i), w.Turns[i].TTFT); err != nil {
			return err
		}
	}
	return nil
}

// WriteSnapshotLog writes each snapshot window as a set of tagged
// intervals (as WriteHistogramLog does for one window), each spanning the
// snapshot's first send to last end.
func WriteSnapshotLog(out io.Writer, snaps []*record.Window, comment string) error {
	var b bytes.Buffer
	lw := hdrhistogram.NewHistogramLogWriter(&b)
	_ = lw.OutputLogFormatVersion()
	if comment != "" {
		_ = lw.OutputComment(strings.ReplaceAll(comment, "\n", " "))
	}
	if len(snaps) > 0 {
		_ = lw.OutputComment("[values in microseconds; hdr " + snaps[0].Config.Fingerprint() + "]")
		_ = lw.OutputStartTime(snaps[0].FirstSend.UnixMilli())
	}
	_ = lw.OutputLegend()
	for _, s := range snaps {
		if err := writeIntervals(lw, s, s.FirstSend, s.LastEnd); err != nil {
			return err
		}
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write snapshot log: %w", err)
	}
	return nil
}

// ErrHistogramLog is wrapped by histogram log parse errors.
var ErrHistogramLog = errors.New("malformed histogram log")

// ReadHistogramLog reads a log written by WriteHistogramLog into a map from
// tag to histogram of cfg; histograms of a tag that appears several times
// are merged. Comment and legend lines are skipped.
func ReadHistogramLog(r io.Reader, cfg hdr.Config) (map[string]*hdr.Histogram, error) {
	out := make(map[string]*hdr.Histogram)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '"' {
			continue
		}
		tag := ""
		if rest, ok := strings.CutPrefix(text, "Tag="); ok {
			t, after, ok := strings.Cut(rest, ",")
			if !ok {
				return nil, fmt.Errorf("read histogram log: line %d: %w: tag without interval", line, ErrHistogramLog)
			}
			tag, text = t, after
		}
		f := strings.SplitN(text, ",", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("read histogram log: line %d: %w: %d fields, want 4", line, ErrHistogramLog, len(f))
		}
		for i := range 3 {
			if _, err := strconv.ParseFloat(f[i], 64); err != nil {
				return nil, fmt.Errorf("read histogram log: line %d field %d: %w: %q", line, i+1, ErrHistogramLog, truncate(f[i]))
			}
		}
		h, err := hdr.Decode(cfg, []byte(f[3]))
		if err != nil {
			return nil, fmt.Errorf("read histogram log: line %d tag %q: %w", line, tag, err)
		}
		if prev := out[tag]; prev != nil {
			if err := prev.Merge(h); err != nil {
				return nil, fmt.Errorf("read histogram log: line %d tag %q: %w", line, tag, err)
			}
			continue
		}
		out[tag] = h
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read histogram log: %w", err)
	}
	return out, nil
}
