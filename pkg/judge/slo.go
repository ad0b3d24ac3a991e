package judge

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// SLO is vLLM's --goodput: the service-level objectives a request must all
// meet to count as good. A zero bound is not an objective.
type SLO struct {
	TTFT, TPOT, E2EL time.Duration
}

// IsZero reports an SLO with no objective: goodput is not measured.
func (s SLO) IsZero() bool { return s == SLO{} }

// String returns the form ParseSLO reads, e.g. "ttft:400 tpot:60".
func (s SLO) String() string {
	var parts []string
	for _, p := range []struct {
		k string
		d time.Duration
	}{{"ttft", s.TTFT}, {"tpot", s.TPOT}, {"e2el", s.E2EL}} {
		if p.d > 0 {
			parts = append(parts, fmt.Sprintf("%s:%g", p.k, float64(p.d)/float64(time.Millisecond)))
		}
	}
	return strings.Join(parts, " ")
}

// ParseSLO parses vLLM's goodput form: KEY:VALUE pairs, separated by spaces
// or commas, with KEY ttft, tpot or e2el and VALUE in milliseconds.
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		k, v, ok := strings.Cut(f, ":")
		ms, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || ms <= 0 {
			return SLO{}, fmt.Errorf("goodput %q: want KEY:MILLISECONDS with KEY ttft, tpot or e2el, e.g. ttft:400", f)
		}
		d := time.Duration(ms * float64(time.Millisecond))
		switch strings.ToLower(k) {
		case "ttft":
			slo.TTFT = d
		case "tpot":
			slo.TPOT = d
		case "e2el":
			slo.E2EL = d
		default:
			return SLO{}, fmt.Errorf("goodput %q: unknown objective %q (ttft, tpot or e2el)", f, k)
		}
	}
	return slo, nil
}

// Good reports whether a sample meets every objective of s: a successful
// request whose TTFT, TPOT (per request, as vLLM computes it) and end-to-end
// latency are within their bounds.
func (s SLO) Good(smp *record.Sample) bool {
	r := smp.Result
	if r == nil || !r.OK() {
		return false
	}
	return (s.TTFT <= 0 || r.TTFT <= s.TTFT) && (s.TPOT <= 0 || r.TPOT() <= s.TPOT) && (s.E2EL <= 0 || r.E2E <= s.E2EL)
}
