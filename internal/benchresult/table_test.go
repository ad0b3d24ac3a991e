package benchresult

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// tableFiles are two runs: the older has a figure the newer lacks, and
// the newer has an A/B pair and a missed goal.
func tableFiles() []File {
	m := Machine{Host: "box", Cores: 2, CPU: "Test CPU", GoVersion: "go1.26.0", OS: "linux", Arch: "amd64", LoadAvg: "1.00 2.00 3.00"}
	return []File{
		{Date: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Commit: "1111111111111111", Machine: m, Runs: []Run{{
			Command: "go test -run='^$' -bench=SimStreaming ./pkg/sim/",
			Benchmarks: []Benchmark{
				{Package: modSim, Name: "BenchmarkSimStreaming", Iterations: 1, Metrics: []Metric{{12.5, "cpu-ms/1k-tokens"}}},
				{Package: modCoordinator, Name: "BenchmarkMerge100Agents/histograms", Iterations: 500, Metrics: []Metric{{60, "cpu-µs/report"}}},
				{Package: modLoad, Name: "BenchmarkClosedLoop/client=fleetbench/http1/sessions=2000", Iterations: 1, Metrics: []Metric{{0.5, "cpu-s/1k-req"}}},
				{Package: modLoad, Name: "BenchmarkClosedLoop/client=nethttp/http1/sessions=2000", Iterations: 1, Metrics: []Metric{{0.8, "cpu-s/1k-req"}}},
			},
		}}},
		{Date: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Commit: "2222222222222222", Dirty: true, Machine: m, Runs: []Run{{
			Command: "go test -run='^$' -bench='Merge100Agents|Decode' -benchmem ./coordinator/",
			Benchmarks: []Benchmark{
				{Package: modCoordinator, Name: "BenchmarkMerge100Agents/histograms", Iterations: 500, Metrics: []Metric{{43.3, "cpu-µs/report"}, {8812, "B/report"}}},
				{Package: modCoordinator, Name: "BenchmarkMerge100Agents/histograms-proto-codec", Iterations: 500, Metrics: []Metric{{48.1, "cpu-µs/report"}}},
				{Package: modCoordinator, Name: "BenchmarkDecodeReport/decodeReport", Iterations: 2000, Metrics: []Metric{{3512, "ns/op"}}},
				{Package: modCoordinator, Name: "BenchmarkDecodeReport/proto.Unmarshal", Iterations: 2000, Metrics: []Metric{{9120, "ns/op"}}},
				// One side only: the pair's row reads the older file, which has both.
				{Package: modLoad, Name: "BenchmarkClosedLoop/client=fleetbench/http1/sessions=2000", Iterations: 1, Metrics: []Metric{{0.7, "cpu-s/1k-req"}}},
			},
		}}},
	}
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, tableFiles(), Goals, Pairs); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.md")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("table differs from %s (go test -update rewrites it):\n%s", golden, b.String())
	}
	// The assertions the golden file could hide if refreshed carelessly.
	for _, row := range []string{
		"| coordinator Merge100Agents/histograms | cpu-µs/report | 43.3 | ≤ 50 cpu-µs/report | met | 2026-12-02 10:00 222222222222 (dirty) |",
		"| pkg/sim SimStreaming | cpu-ms/1k-tokens | 12.5 | ≤ 10 cpu-ms/1k-tokens | missed | 2026-12-01 10:00 111111111111 |",
		"| report decoder + ack (replaced by the proto codec): coordinator CPU at 100 agents, shared connection | cpu-µs/report | 43.3 | 48.1 | 10% | 20% | does not earn it |",
		"| report decoder (replaced) against proto.Unmarshal | ns/op | 3512 | 9120 | 61% | – | part of a path above |",
		"| event loops + own HTTP/1.1 against net/http + encoding/json at 2,000 sessions: CPU | cpu-s/1k-req | 0.5 | 0.8 | 38% | 10% | earns it | 2026-12-01 10:00 111111111111 |",
		"| pkg/load FloorRatio/sessions=8000 | KiB/stream | – | ≤ 32 KiB/stream | n/a |",
	} {
		if !strings.Contains(b.String(), row) {
			t.Errorf("table lacks %q", row)
		}
	}
}

// TestCommittedTable fails when docs/benchmarks.md is not what the
// generator makes from the committed results: the table is never edited
// by hand.
func TestCommittedTable(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := ReadDir(filepath.Join(root, "bench", "results"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, files, Goals, Pairs); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != b.String() {
		t.Errorf("docs/benchmarks.md is not what `%s` makes from bench/results: run it and commit", TableCommand)
	}
}

func TestFileWriteRead(t *testing.T) {
	dir := t.TempDir()
	files := tableFiles()
	// Written newest first: ReadDir must return them oldest first.
	for i := len(files) - 1; i >= 0; i-- {
		if _, err := files[i].Write(dir); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "20261202T100000Z-222222222222-dirty-box.json")); err != nil {
		t.Errorf("want the file named by date, commit and host: %v", err)
	}
	got, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Date.Before(got[1].Date) || got[1].Runs[0].Benchmarks[0].Metrics[1].Value != 8812 {
		t.Errorf("read back %+v", got)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 43.3: "43.3", 1.23456: "1.235", 0.012345: "0.01235", 12345.6: "12346", 1e10: "10000000000", 8812: "8812"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
