package main

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
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

// packageDirs returns every directory of the module that holds a Go
// package (a non-test .go file), as go list ./... sees them: slash paths
// relative to the root, the root itself as ".". Like the go command it
// skips testdata, directories whose names begin with "." or "_", and
// nested modules (a directory with a go.mod of its own).
func packageDirs(t *testing.T) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if p != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.ToSlash(filepath.Dir(p))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the tree: %v", err)
	}
	return dirs
}

// markdownSection returns the lines of file's section that starts with the
// heading line head, up to the next heading of the same or a higher level.
func markdownSection(t *testing.T, file, head string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	level := strings.IndexFunc(head, func(r rune) bool { return r != '#' })
	var out []string
	in, fenced := false, false
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			l := strings.IndexFunc(line, func(r rune) bool { return r != '#' })
			if in && l > 0 && l <= level {
				break
			}
			if strings.TrimSpace(line) == head {
				in = true
				continue
			}
		}
		if in {
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s has no section %q", file, head)
	}
	return out
}

// designTableDirs returns the directories of docs/design.md's package
// table: the first cell, in backticks, of each row under "## Packages".
func designTableDirs(t *testing.T) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	for _, line := range markdownSection(t, "docs/design.md", "## Packages") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		first := strings.TrimSpace(cells[1])
		if len(first) < 3 || first[0] != '`' || first[len(first)-1] != '`' {
			continue // the header or its rule
		}
		dirs[strings.TrimSuffix(strings.Trim(first, "`"), "/")] = true
	}
	return dirs
}

// readmeLayoutPath is a code span of the README's Layout list that names a
// directory: "." or a slash path of lower-case names.
var readmeLayoutPath = regexp.MustCompile("`(\\.|[a-z][a-z0-9_]*(?:/[a-z0-9_]+)*)/?`")

// readmeLayoutDirs returns the directories the README's Layout section
// names in backticks (the section names nothing else in backticks).
func readmeLayoutDirs(t *testing.T) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	for _, line := range markdownSection(t, "README.md", "## Layout") {
		for _, m := range readmeLayoutPath.FindAllStringSubmatch(line, -1) {
			dirs[m[1]] = true
		}
	}
	return dirs
}

// compareLayout reports, naming each, the package directories the tree
// has and the document lacks, and those it lists that hold no package.
func compareLayout(t reporter, doc string, listed, tree map[string]bool) {
	t.Helper()
	if len(listed) < 10 {
		t.Fatalf("%s lists only %d package directories: %v", doc, len(listed), slices.Sorted(maps.Keys(listed)))
	}
	for _, d := range slices.Sorted(maps.Keys(tree)) {
		if !listed[d] {
			t.Errorf("%s does not list package directory %s (it holds non-test .go files): add it", doc, d)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(listed)) {
		if !tree[d] {
			t.Errorf("%s lists %s, which holds no Go package (no non-test .go file): remove or rename it", doc, d)
		}
	}
}

// reporter is the part of *testing.T that compareLayout uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// recordingT is a reporter that keeps the messages.
type recordingT struct{ errs []string }

func (r *recordingT) Helper() {}
func (r *recordingT) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordingT) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

// TestLayoutTableMatchesTree: docs/design.md's package table has one row
// for every directory of the module that holds a Go package, and no other.
func TestLayoutTableMatchesTree(t *testing.T) {
	compareLayout(t, "docs/design.md's package table (## Packages)", designTableDirs(t), packageDirs(t))
}

// TestReadmeLayoutMatchesTree: the README's Layout list names every
// directory of the module that holds a Go package, and no other.
func TestReadmeLayoutMatchesTree(t *testing.T) {
	compareLayout(t, "README.md's layout list (## Layout)", readmeLayoutDirs(t), packageDirs(t))
}

// TestCompareLayoutNamesDifferences: the comparison fails, naming the
// directory, in each direction.
func TestCompareLayoutNamesDifferences(t *testing.T) {
	tree := map[string]bool{".": true, "agent": true, "pkg/judge": true}
	listed := map[string]bool{".": true, "agent": true, "pkg/prom": true}
	for k := range 10 {
		tree["pkg/p"+strconv.Itoa(k)] = true
		listed["pkg/p"+strconv.Itoa(k)] = true
	}
	rec := &recordingT{}
	compareLayout(rec, "doc", listed, tree)
	got := strings.Join(rec.errs, "\n")
	for _, want := range []string{"does not list package directory pkg/judge", "lists pkg/prom, which holds no Go package"} {
		if !strings.Contains(got, want) {
			t.Errorf("compareLayout errors %q lack %q", got, want)
		}
	}
}
