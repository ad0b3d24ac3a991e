package judge

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// Threshold is a pass/fail criterion on a result, k6-style:
// "ttft_p95<400ms", "error_rate<1%", "goodput>5". Latencies are
// TTFT, TPOT, ITL and E2EL at a percentile (_p50, _p99.9, ...) or their
// _mean; error_rate is failed requests in percent of requests sent;
// goodput and request_throughput are requests per second,
// output_throughput tokens per second. It is a plain value.
type Threshold struct {
	// Raw is the text it was parsed from.
	Raw string
	// Metric is the left-hand side, e.g. "ttft_p95".
	Metric string
	// Op is one of <, <=, >, >=.
	Op string
	// Value is the bound in the metric's unit: milliseconds for
	// latencies, percent for error_rate, per second for rates.
	Value float64
}

// ErrThreshold is wrapped by ParseThreshold's errors.
var ErrThreshold = errors.New("threshold")

// ParseThreshold parses one threshold.
func ParseThreshold(s string) (Threshold, error) {
	raw := strings.TrimSpace(s)
	i := strings.IndexAny(raw, "<>")
	if i <= 0 {
		return Threshold{}, fmt.Errorf("%w %q: want METRIC<VALUE, e.g. ttft_p95<400ms or error_rate<1%%", ErrThreshold, s)
	}
	t := Threshold{Raw: raw, Metric: strings.TrimSpace(raw[:i]), Op: raw[i : i+1]}
	rest := raw[i+1:]
	if strings.HasPrefix(rest, "=") {
		t.Op, rest = t.Op+"=", rest[1:]
	}
	rest = strings.TrimSpace(rest)
	kind, err := kindOf(t.Metric)
	if err != nil {
		return Threshold{}, fmt.Errorf("%w %q: %w", ErrThreshold, s, err)
	}
	switch kind {
	case kindLatency:
		if d, err := time.ParseDuration(rest); err == nil {
			t.Value = float64(d) / float64(time.Millisecond)
			break
		}
		if t.Value, err = strconv.ParseFloat(rest, 64); err != nil {
			return Threshold{}, fmt.Errorf("%w %q: %q is not a duration (400ms) or milliseconds", ErrThreshold, s, rest)
		}
	case kindPercent:
		if t.Value, err = strconv.ParseFloat(strings.TrimSuffix(rest, "%"), 64); err != nil {
			return Threshold{}, fmt.Errorf("%w %q: %q is not a percentage", ErrThreshold, s, rest)
		}
	default:
		if t.Value, err = strconv.ParseFloat(rest, 64); err != nil {
			return Threshold{}, fmt.Errorf("%w %q: %q is not a number", ErrThreshold, s, rest)
		}
	}
	return t, nil
}

type unitKind int

const (
	kindLatency unitKind = iota
	kindPercent
	kindRate
)

var latencyMetrics = map[string]record.Metric{"ttft": record.TTFT, "tpot": record.TPOT, "itl": record.ITL, "e2el": record.E2E}

// kindOf checks a metric name and returns its kind.
func kindOf(m string) (unitKind, error) {
	switch m {
	case "error_rate":
		return kindPercent, nil
	case "goodput", "request_throughput", "output_throughput":
		return kindRate, nil
	}
	name, stat, ok := strings.Cut(m, "_")
	if _, known := latencyMetrics[name]; ok && known {
		if stat == "mean" {
			return kindLatency, nil
		}
		if p, err := strconv.ParseFloat(strings.TrimPrefix(stat, "p"), 64); err == nil && strings.HasPrefix(stat, "p") && p > 0 && p <= 100 {
			return kindLatency, nil
		}
	}
	return 0, fmt.Errorf("unknown metric %q (ttft|tpot|itl|e2el with _pNN or _mean, error_rate, goodput, request_throughput, output_throughput)", m)
}

// Verdict is one threshold checked against a result.
type Verdict struct {
	Threshold
	// Actual is the measured value in the threshold's unit; NaN when it
	// could not be measured (no successful request, no --goodput).
	Actual float64
	// Pass reports whether Actual meets the threshold; an unmeasured value
	// fails.
	Pass bool
}

// Rates are the figures of a result a threshold can name besides the
// latencies, which come from the window's histograms.
type Rates struct {
	// Completed and Failed count the requests sent in the window.
	Completed, Failed int64
	// Goodput (NaN when not measured), RequestThroughput and
	// OutputThroughput are per second.
	Goodput, RequestThroughput, OutputThroughput float64
}

// Rater is what Check reads the rates of; result.Summary is one.
type Rater interface {
	ThresholdRates() Rates
}

// Check measures t on the result s of window w.
func (t Threshold) Check(s Rater, w *record.Window) Verdict {
	v := Verdict{Threshold: t, Actual: math.NaN()}
	r := s.ThresholdRates()
	switch t.Metric {
	case "error_rate":
		if n := r.Completed + r.Failed; n > 0 {
			v.Actual = float64(r.Failed) * 100 / float64(n)
		}
	case "goodput":
		v.Actual = r.Goodput
	case "request_throughput":
		v.Actual = r.RequestThroughput
	case "output_throughput":
		v.Actual = r.OutputThroughput
	default:
		name, stat, _ := strings.Cut(t.Metric, "_")
		h := w.Hist[latencyMetrics[name]]
		if h != nil && h.Count() > 0 {
			if stat == "mean" {
				v.Actual = h.Unwrap().Mean() / 1000 // micros to ms
			} else {
				p, _ := strconv.ParseFloat(strings.TrimPrefix(stat, "p"), 64)
				v.Actual = float64(h.Percentile(p)) / float64(time.Millisecond)
			}
		}
	}
	if !math.IsNaN(v.Actual) {
		switch t.Op {
		case "<":
			v.Pass = v.Actual < t.Value
		case "<=":
			v.Pass = v.Actual <= t.Value
		case ">":
			v.Pass = v.Actual > t.Value
		case ">=":
			v.Pass = v.Actual >= t.Value
		}
	}
	return v
}

// ThresholdError is returned when thresholds fail; commands exit with a
// code of their own for it.
type ThresholdError struct{ Failed []Verdict }

func (e *ThresholdError) Error() string {
	parts := make([]string, len(e.Failed))
	for i, v := range e.Failed {
		parts[i] = fmt.Sprintf("%s (measured %s)", v.Raw, v.Measured())
	}
	return fmt.Sprintf("%d threshold(s) failed: %s", len(e.Failed), strings.Join(parts, "; "))
}

// Measured is the measured value with its unit, "n/a" when unmeasured.
func (v Verdict) Measured() string {
	if math.IsNaN(v.Actual) {
		return "n/a"
	}
	kind, _ := kindOf(v.Metric)
	switch kind {
	case kindLatency:
		return fmt.Sprintf("%.2f ms", v.Actual)
	case kindPercent:
		return fmt.Sprintf("%.2f%%", v.Actual)
	default:
		return fmt.Sprintf("%.2f/s", v.Actual)
	}
}
