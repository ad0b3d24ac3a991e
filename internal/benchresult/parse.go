package benchresult

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Metric is one figure of a benchmark: a value and its unit, as
// `go test -bench` prints it ("ns/op", "B/op", "cpu-µs/report").
type Metric struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Benchmark is one benchmark's line of output: its package, its name
// without the GOMAXPROCS suffix, the iterations and every metric in the
// order printed.
type Benchmark struct {
	Package    string   `json:"package"`
	Name       string   `json:"name"`
	Procs      int      `json:"procs,omitempty"`
	Iterations int64    `json:"iterations"`
	Metrics    []Metric `json:"metrics"`
}

// Metric returns the value of the metric in unit and whether b has it.
func (b Benchmark) Metric(unit string) (float64, bool) {
	for _, m := range b.Metrics {
		if m.Unit == unit {
			return m.Value, true
		}
	}
	return 0, false
}

// Output is what Parse finds in the output of one `go test -bench` run:
// the benchmarks and the CPU model the test binary reported.
type Output struct {
	CPU        string
	Benchmarks []Benchmark
}

// Parse reads the output of `go test -bench` (any number of packages) and
// returns its benchmark lines. A line that starts with "Benchmark" but is
// not a result (a benchmark's own log line, a failure) is skipped.
func Parse(r io.Reader) (Output, error) {
	var out Output
	p := &parser{out: &out}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		p.line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read benchmark output: %w", err)
	}
	return out, nil
}

// parser holds the package a run of lines belongs to.
type parser struct {
	pkg string
	out *Output
}

// line takes one line of output.
func (p *parser) line(s string) {
	switch {
	case strings.HasPrefix(s, "pkg: "):
		p.pkg = strings.TrimSpace(strings.TrimPrefix(s, "pkg: "))
	case strings.HasPrefix(s, "cpu: "):
		p.out.CPU = strings.TrimSpace(strings.TrimPrefix(s, "cpu: "))
	case strings.HasPrefix(s, "Benchmark"):
		if b, ok := parseLine(s); ok {
			b.Package = p.pkg
			p.out.Benchmarks = append(p.out.Benchmarks, b)
		}
	}
}

// parseLine parses "BenchmarkName-8  1000  12.5 ns/op  0 B/op ...": a
// name, the iterations, then value and unit pairs.
func parseLine(s string) (Benchmark, bool) {
	f := strings.Fields(s)
	if len(f) < 4 || len(f)%2 != 0 {
		return Benchmark{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Benchmark{}, false
	}
	b := Benchmark{Iterations: n}
	b.Name, b.Procs = splitProcs(f[0])
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Benchmark{}, false
		}
		b.Metrics = append(b.Metrics, Metric{Value: v, Unit: f[i+1]})
	}
	return b, true
}

// splitProcs splits the "-N" that go test appends to a benchmark's name
// when GOMAXPROCS is not 1. A name that itself ends in "-digits" and ran
// with GOMAXPROCS 1 is misread; no benchmark of this repository is named so.
func splitProcs(name string) (string, int) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name, 0
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n <= 0 {
		return name, 0
	}
	return name[:i], n
}
