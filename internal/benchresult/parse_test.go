package benchresult

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	f, err := os.Open("testdata/coordinator.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if out.CPU != "Intel(R) Xeon(R) Processor @ 2.10GHz" {
		t.Errorf("CPU = %q", out.CPU)
	}
	const coord = "github.com/fleetbench/fleetbench/coordinator"
	var names []string
	for _, b := range out.Benchmarks {
		names = append(names, b.Package+" "+b.Name)
	}
	want := []string{
		coord + " BenchmarkMerge100Agents/histograms",
		coord + " BenchmarkMerge100Agents/histograms-proto-codec",
		coord + " BenchmarkDecodeReport/decodeReport",
		coord + " BenchmarkDecodeReport/proto.Unmarshal",
		"github.com/fleetbench/fleetbench/pkg/hdr BenchmarkEncode/hdr",
		"github.com/fleetbench/fleetbench/pkg/hdr BenchmarkRecord",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("benchmarks:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	merge := out.Benchmarks[0]
	if merge.Procs != 2 || merge.Iterations != 500 || len(merge.Metrics) != 10 {
		t.Errorf("merge: procs %d, iterations %d, %d metrics; want 2, 500, 10", merge.Procs, merge.Iterations, len(merge.Metrics))
	}
	for unit, want := range map[string]float64{"cpu-µs/report": 43.3, "B/report": 8812, "B/op": 8811, "allocs/op": 62, "ns/op": 0} {
		if got, ok := merge.Metric(unit); !ok || got != want {
			t.Errorf("merge %s = %v, %v; want %v", unit, got, ok, want)
		}
	}
	if rec := out.Benchmarks[5]; rec.Procs != 0 || rec.Iterations != 1000000 {
		t.Errorf("record: procs %d iterations %d; want 0 (GOMAXPROCS 1 prints no suffix), 1000000", rec.Procs, rec.Iterations)
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		name, line string
		ok         bool
		bench      string
		procs      int
	}{
		{"plain", "BenchmarkX-8 100 5.5 ns/op", true, "BenchmarkX", 8},
		{"sub with equals", "BenchmarkClosedLoop/client=fleetbench/http1/sessions=2000-16 1 0 ns/op 1.5 ttft-added-p50-ms", true, "BenchmarkClosedLoop/client=fleetbench/http1/sessions=2000", 16},
		{"dashed name", "BenchmarkM/histograms-conn-each-2 500 0 ns/op", true, "BenchmarkM/histograms-conn-each", 2},
		{"log line", "BenchmarkX is slow today", false, "", 0},
		{"odd fields", "BenchmarkX-2 100 5.5", false, "", 0},
		{"bad value", "BenchmarkX-2 100 fast ns/op", false, "", 0},
		{"no metrics", "BenchmarkX-2 100", false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ok := parseLine(tt.line)
			if ok != tt.ok || b.Name != tt.bench || b.Procs != tt.procs {
				t.Errorf("parseLine(%q) = %q procs %d, %v; want %q procs %d, %v", tt.line, b.Name, b.Procs, ok, tt.bench, tt.procs, tt.ok)
			}
		})
	}
}
