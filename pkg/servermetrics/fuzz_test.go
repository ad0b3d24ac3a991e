package servermetrics

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary pages to both formats: Parse must return a page
// or an error, never panic, and never keep a name outside the catalogue.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"vllm_a_start.txt", "sglang_end.txt", "dynamo_frontend_end.txt", "openmetrics.txt", "malformed.txt"} {
		f.Add(readFixture(f, name), false)
		f.Add(readFixture(f, name), true)
	}
	f.Add([]byte("vllm:num_requests_running 1\n"), true)
	f.Add([]byte("# TYPE x info\nx_info{a=\"b\"} 1\n# EOF\n"), true)
	f.Fuzz(func(t *testing.T, page []byte, om bool) {
		ct := "text/plain; version=0.0.4"
		if om {
			ct = "application/openmetrics-text; version=1.0.0"
		}
		p, err := Parse(bytes.NewReader(page), ct)
		if err != nil {
			return
		}
		for _, n := range p.Names() {
			if !catalogue[n] {
				t.Fatalf("kept %s", n)
			}
		}
	})
}

// FuzzOpenMetricsSample checks the OpenMetrics rewriting against the
// reference the fuzzer itself chose: a counter sample with any label value,
// followed by any timestamp and exemplar, reads back as that label value
// and that value.
func FuzzOpenMetricsSample(f *testing.F) {
	f.Add(`plain`, 42.0, `1700000000.25`, `# {trace_id="x"} 1.0`)
	f.Add(`a # {b} "c"`, 0.5, ``, ``)
	f.Add(`back\slash`, 7.0, `1`, `# {} 2`)
	f.Fuzz(func(t *testing.T, labelValue string, v float64, ts, exemplar string) {
		if strings.ContainsAny(labelValue, "\n") || strings.ContainsAny(ts+exemplar, "\n") || !validUTF8(labelValue) {
			t.Skip()
		}
		if v != v || v < 0 || v > 1e15 { // NaN, negative or huge values are not the point here
			t.Skip()
		}
		esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(labelValue)
		line := `vllm:prefix_cache_hits_total{model_name="` + esc + `"} ` + strconv.FormatFloat(v, 'g', -1, 64)
		page := "# TYPE vllm:prefix_cache_hits counter\n" + line + " " + ts + " " + exemplar + "\n# EOF\n"
		p, err := Parse(strings.NewReader(page), "application/openmetrics-text; version=1.0.0")
		if err != nil {
			t.Fatalf("page %q: %v", page, err)
		}
		s := p.scalars["vllm:prefix_cache_hits_total"]
		if len(s) != 1 || s[0].v != v || s[0].labels[0].GetValue() != labelValue {
			t.Fatalf("page %q read as %+v", page, s)
		}
	})
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
