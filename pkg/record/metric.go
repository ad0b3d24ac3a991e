package record

import "fmt"

// Metric names one of a Window's latency histograms.
type Metric int

// The latency metrics, as defined in docs/design.md.
const (
	TTFT         Metric = iota // time to the first content (or reasoning) chunk
	TTFB                       // time to the first byte of the response body
	ITL                        // each gap between consecutive content (or reasoning) chunks
	TPOT                       // (E2E - TTFT) / (output tokens - 1), per request
	E2E                        // time to the end of the stream
	Lag                        // actual send time - intended send time
	TTFTIntended               // Lag + TTFT
	E2EIntended                // Lag + E2E
	NumMetrics                 // the number of metrics; not a metric
)

var metricNames = [NumMetrics]string{"ttft", "ttfb", "itl", "tpot", "e2e", "lag", "ttft_intended", "e2e_intended"}

// String returns the metric's name as every output uses it, e.g. "ttft" or
// "e2e_intended".
func (m Metric) String() string {
	if m < 0 || m >= NumMetrics {
		return fmt.Sprintf("Metric(%d)", int(m))
	}
	return metricNames[m]
}

// ParseMetric returns the Metric whose String is name.
func ParseMetric(name string) (Metric, error) {
	for m, n := range metricNames {
		if n == name {
			return Metric(m), nil
		}
	}
	return 0, fmt.Errorf("parse metric: unknown metric %q", name)
}
