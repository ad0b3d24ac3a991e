package benchresult

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// FiguresEnv names the file a test that is not a benchmark (the soak, the
// calibration) appends its figures to; Exec sets it for the command it
// runs, and Emit writes to it.
const FiguresEnv = "FLEETBENCH_FIGURES"

// knobPrefix marks the environment variables that change what a benchmark
// measures; Exec writes those set into the command it records.
const knobPrefix = "FLEETBENCH_"

// Exec runs argv, copying its standard output to stdout while parsing it,
// and returns the Run: the command as it would be typed (the FLEETBENCH_
// knobs set in the environment first) and every figure it printed or
// emitted through FiguresEnv. The command's standard error goes to stderr.
// A command that fails returns its figures so far and an *exec.ExitError.
func Exec(ctx context.Context, argv []string, stdout, stderr io.Writer) (Run, string, error) {
	if len(argv) == 0 {
		return Run{}, "", errors.New("run benchmark: no command")
	}
	figs, err := os.CreateTemp("", "fleetbench-figures-*.jsonl")
	if err != nil {
		return Run{}, "", fmt.Errorf("create figures file: %w", err)
	}
	figs.Close()
	defer os.Remove(figs.Name())

	run := Run{Command: CommandLine(os.Environ(), argv), LoadAvg: loadAvg()}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), FiguresEnv+"="+figs.Name())
	cmd.Stderr = stderr
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(stdout, pw)
	parsed := make(chan Output, 1)
	go func() {
		out, _ := Parse(pr)
		_, _ = io.Copy(io.Discard, pr)
		parsed <- out
	}()
	runErr := cmd.Run()
	pw.Close()
	out := <-parsed
	run.Benchmarks = out.Benchmarks
	emitted, err := readFigures(figs.Name())
	if err != nil {
		return run, out.CPU, err
	}
	run.Benchmarks = append(run.Benchmarks, emitted...)
	if runErr != nil {
		return run, out.CPU, fmt.Errorf("run %s: %w", argv[0], runErr)
	}
	return run, out.CPU, nil
}

// CommandLine writes argv as a shell command, after the FLEETBENCH_
// knobs set in env (sorted), each word quoted where the shell needs it.
func CommandLine(env, argv []string) string {
	var knobs []string
	for _, kv := range env {
		if strings.HasPrefix(kv, knobPrefix) && !strings.HasPrefix(kv, FiguresEnv+"=") {
			k, v, _ := strings.Cut(kv, "=")
			knobs = append(knobs, k+"="+shellQuote(v))
		}
	}
	sort.Strings(knobs)
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = shellQuote(a)
	}
	return strings.Join(append(knobs, words...), " ")
}

// shellQuote quotes s for a POSIX shell unless it needs none.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Emit appends a figure to the file FiguresEnv names, for a test that
// prints verdicts rather than benchmark lines (the soak, the calibration).
// Without FiguresEnv it does nothing. pkg is the import path the figure
// is filed under. Safe for concurrent use only across processes that
// append whole lines (each call is one write).
func Emit(pkg, name string, metrics ...Metric) error {
	path := os.Getenv(FiguresEnv)
	if path == "" {
		return nil
	}
	b, err := json.Marshal(Benchmark{Package: pkg, Name: name, Iterations: 1, Metrics: metrics})
	if err != nil {
		return fmt.Errorf("encode figure: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open figures file: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write figure: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close figures file: %w", err)
	}
	return nil
}

// readFigures reads the figures Emit appended to path.
func readFigures(path string) ([]Benchmark, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read figures file: %w", err)
	}
	var out []Benchmark
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var bm Benchmark
		if err := json.Unmarshal([]byte(line), &bm); err != nil {
			return out, fmt.Errorf("decode figure: %w", err)
		}
		out = append(out, bm)
	}
	return out, nil
}
