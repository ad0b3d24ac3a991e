package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/sweep/runner"
)

// docFiles are the documents whose fenced `fleetbench ...` commands must
// run as written.
var docFiles = []string{"README.md", "deploy/README.md", "docs/workloads.md", "docs/kube-env.md", "docs/design.md", "docs/server-metrics.md", "docs/dashboard.md"}

// docCommand is one command line from a document.
type docCommand struct {
	file string
	line int
	args []string
}

// docCommands extracts the fenced shell commands that start with
// "fleetbench ", joining "\" continuations and dropping "# comments".
// Synopsis lines ("fleetbench [flags] <command>") are skipped.
func docCommands(t *testing.T, file string) []docCommand {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []docCommand
	fenced := false
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			continue
		}
		if cur.Len() == 0 {
			if !strings.HasPrefix(strings.TrimSpace(line), "fleetbench ") {
				continue
			}
			start = n
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd := cur.String()
		cur.Reset()
		if strings.ContainsAny(cmd, "[<") {
			continue // a synopsis, not a command
		}
		out = append(out, docCommand{file: file, line: start, args: strings.Fields(cmd)[1:]})
	}
	return out
}

// TestDocCommandsRun runs every fenced fleetbench command of the docs as a
// user would type it: run, sweep and coordinator with --dry-run (every
// flag parsed and the whole configuration validated, nothing started),
// report for real on sweep outputs, the long-running servers (sim, agent)
// and the cluster commands (probe, fetch)
// with -h (their flags parsed). Each must exit 0.
func TestDocCommandsRun(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []docCommand
	for _, f := range docFiles {
		cmds = append(cmds, docCommands(t, filepath.Join(root, f))...)
	}
	if len(cmds) < 10 {
		t.Fatalf("only %d commands found in the docs", len(cmds))
	}
	dir := t.TempDir()
	docFixtures(t, root, dir)
	t.Chdir(dir)
	for _, dc := range cmds {
		args := dc.args
		switch args[0] {
		case "run", "sweep", "coordinator":
			if !contains(args, "--dry-run") {
				args = append(args, "--dry-run")
			}
		case "sim", "agent", "probe", "fetch":
			args = append(args, "-h")
		}
		name := filepath.Base(dc.file) + ":" + strconv.Itoa(dc.line)
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t.Context(), args...)
			if code != exitOK {
				t.Errorf("fleetbench %s\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
			}
		})
	}
}

// docFixtures lays out, in dir, the files the docs' commands name: a
// sweep file, a token, three days of sweep output, an interrupted sweep.
func docFixtures(t *testing.T, root, dir string) {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join(root, "deploy/examples/vllm/sweep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tsv, err := os.ReadFile(filepath.Join(root, "pkg/report/testdata/sweep.golden.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("sweep.yaml", spec)
	baseline, err := os.ReadFile(filepath.Join(root, "pkg/report/testdata/baseline.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join("out", "demo", "baseline.json"), baseline)
	write("token", []byte("doc-test-token\n"))
	for _, day := range []string{"day1", "day2", "day3"} {
		write(filepath.Join("out", day, report.TSVName("20261125-000000")), tsv)
	}
	write(filepath.Join("out", "sweep-1", runner.SpecFile), spec)
	// Two run outputs for the report of runs.
	for _, r := range []struct{ dir, mode string }{{"kv-100", "kv"}, {"rr-100", "round_robin"}} {
		code, stdout, stderr := runCommand(t.Context(), "--log-level", "warn", "run", "--concurrency", "2", "--warmup", "0s",
			"--duration", "1s", "--sim-time-scale", "20", "--sim-router", r.mode, "--label", r.mode,
			"--out", filepath.Join(dir, "out", r.dir))
		if code != exitOK {
			t.Fatalf("fixture run %s: exit %d\n%s\n%s", r.dir, code, stdout, stderr)
		}
	}
	write(filepath.Join("out", "sweep-1", report.SweepFile), []byte(`{"id":"20261125-000000"}`))
}

func contains(args []string, s string) bool {
	for _, a := range args {
		if a == s || strings.HasPrefix(a, s+"=") {
			return true
		}
	}
	return false
}

// TestDeployJobArgsRun runs the coordinator Job's command line from
// deploy/base/job.yaml with --dry-run against the base's sweep file and
// every example's: the flags the manifests pass must exist and the sweep
// files they mount must validate.
func TestDeployJobArgsRun(t *testing.T) {
	b, err := os.ReadFile("deploy/base/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args []string `json:"args"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &job); err != nil {
		t.Fatal(err)
	}
	args := job.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, "-f")
	if len(args) == 0 || args[0] != "sweep" || i < 0 {
		t.Fatalf("job args %q: want sweep -f FILE ...", args)
	}
	files, _ := filepath.Glob("deploy/examples/*/sweep.yaml")
	files = append(files, "deploy/base/sweep.yaml")
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			a := slices.Clone(args)
			a[i+1] = f
			if j := slices.Index(a, "--token-file"); j >= 0 {
				a[j+1] = token
			}
			a = append(a, "--dry-run")
			if code, stdout, stderr := runCommand(t.Context(), a...); code != exitOK {
				t.Errorf("fleetbench %s\nexit %d\n%s\n%s", strings.Join(a, " "), code, stdout, stderr)
			}
		})
	}
}
