package benchresult

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestExec(t *testing.T) {
	t.Setenv("FLEETBENCH_FLOOR_RUNS", "1")
	script := `echo 'pkg: example.com/p'
echo 'BenchmarkA-2 10 5 ns/op 7 cpu-µs/report'
printf '%s\n' '{"package":"example.com/soak","name":"Soak","iterations":1,"metrics":[{"value":0,"unit":"failures"}]}' >> "$FLEETBENCH_FIGURES"
exit 3`
	var stdout, stderr bytes.Buffer
	run, _, err := Exec(t.Context(), []string{"sh", "-c", script}, &stdout, &stderr)
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 3 {
		t.Fatalf("err = %v, want the command's exit status 3", err)
	}
	if !strings.Contains(stdout.String(), "BenchmarkA-2 10 5 ns/op") {
		t.Errorf("stdout %q: want the command's output copied", stdout.String())
	}
	if len(run.Benchmarks) != 2 {
		t.Fatalf("benchmarks %+v, want the printed and the emitted one", run.Benchmarks)
	}
	if b := run.Benchmarks[0]; b.Package != "example.com/p" || b.Name != "BenchmarkA" {
		t.Errorf("printed %+v", b)
	}
	if v, ok := run.Benchmarks[1].Metric("failures"); !ok || v != 0 || run.Benchmarks[1].Name != "Soak" {
		t.Errorf("emitted %+v", run.Benchmarks[1])
	}
	if !strings.HasPrefix(run.Command, "FLEETBENCH_FLOOR_RUNS=1 sh -c '") {
		t.Errorf("command %q: want the knob first, the script quoted", run.Command)
	}
}

func TestCommandLine(t *testing.T) {
	got := CommandLine(
		[]string{"PATH=/bin", "FLEETBENCH_B=2", "FLEETBENCH_A=x y", FiguresEnv + "=/tmp/f"},
		[]string{"go", "test", "-run=^$", "-bench=ClosedLoop", "./pkg/load/"})
	want := `FLEETBENCH_A='x y' FLEETBENCH_B=2 go test '-run=^$' -bench=ClosedLoop ./pkg/load/`
	if got != want {
		t.Errorf("CommandLine = %s\nwant %s", got, want)
	}
}

func TestEmitWithoutFile(t *testing.T) {
	t.Setenv(FiguresEnv, "")
	if err := Emit("p", "Soak", Metric{1, "x"}); err != nil {
		t.Errorf("Emit without %s: %v, want nothing done", FiguresEnv, err)
	}
}
