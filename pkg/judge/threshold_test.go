package judge

import (
	"errors"
	"strings"
	"testing"
)

func TestParseThreshold(t *testing.T) {
	for in, want := range map[string]Threshold{
		"ttft_p95<400ms":        {Metric: "ttft_p95", Op: "<", Value: 400},
		"e2el_p99.9 <= 2s":      {Metric: "e2el_p99.9", Op: "<=", Value: 2000},
		"tpot_mean<60":          {Metric: "tpot_mean", Op: "<", Value: 60},
		"error_rate<1%":         {Metric: "error_rate", Op: "<", Value: 1},
		"goodput>=5.5":          {Metric: "goodput", Op: ">=", Value: 5.5},
		"output_throughput>100": {Metric: "output_throughput", Op: ">", Value: 100},
	} {
		got, err := ParseThreshold(in)
		want.Raw = strings.TrimSpace(in)
		if err != nil || got != want {
			t.Errorf("ParseThreshold(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ttft_p95", "ttft_p950<1s", "latency<1s", "ttft_p95<soon", "error_rate<x%", "<5"} {
		if _, err := ParseThreshold(bad); !errors.Is(err, ErrThreshold) {
			t.Errorf("ParseThreshold(%q): %v, want ErrThreshold", bad, err)
		}
	}
}
