package benchresult

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Run is one command of a results file and the figures it printed.
// LoadAvg is the machine's load average when it started.
type Run struct {
	Command    string      `json:"command"`
	LoadAvg    string      `json:"loadavg,omitempty"`
	Benchmarks []Benchmark `json:"benchmarks"`
}

// Machine is what a results file says about where it was measured.
// LoadAvg is /proc/loadavg's first three fields when the file was written:
// a shared machine's figures are noisy, and this says how much so.
type Machine struct {
	Host      string `json:"host"`
	Cores     int    `json:"cores"`
	CPU       string `json:"cpu"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	LoadAvg   string `json:"loadavg,omitempty"`
}

// File is one results file: a whole `make bench` (or soak, calibration,
// bundle) run.
type File struct {
	Date    time.Time `json:"date"`
	Commit  string    `json:"commit"`
	Dirty   bool      `json:"dirty,omitempty"`
	Machine Machine   `json:"machine"`
	Runs    []Run     `json:"runs"`
}

// Name is the file's name under bench/results: its UTC date and time to
// the second, the commit's first 12 hex digits and the host, so that
// names sort by date.
func (f File) Name() string {
	c := f.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if c == "" {
		c = "unknown"
	}
	if f.Dirty {
		c += "-dirty"
	}
	host := strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, f.Machine.Host)
	return fmt.Sprintf("%s-%s-%s.json", f.Date.UTC().Format("20060102T150405Z"), c, host)
}

// Write writes f as indented JSON into dir under its Name and returns the
// path.
func (f File) Write(dir string) (string, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create results folder: %w", err)
	}
	path := filepath.Join(dir, f.Name())
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return path, nil
}

// ReadDir reads every *.json results file in dir, oldest first (by Date,
// then name).
func ReadDir(dir string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list results: %w", err)
	}
	// Glob sorts by name, which starts with the date: the stable sort
	// below keeps that order for files of the same date.
	files := make([]File, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read results: %w", err)
		}
		var f File
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("decode results %s: %w", filepath.Base(p), err)
		}
		files = append(files, f)
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Date.Before(files[j].Date) })
	return files, nil
}

// Facts returns this machine's facts. cpu is the CPU model the test
// binaries printed ("cpu: ..."), used when /proc/cpuinfo has none.
func Facts(cpu string) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpu}
	m.Host, _ = os.Hostname()
	if model := cpuModel(); model != "" {
		m.CPU = model
	}
	m.LoadAvg = loadAvg()
	return m
}

// loadAvg is /proc/loadavg's first three fields, empty where there is none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuModel is /proc/cpuinfo's first "model name".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// GitCommit returns the working tree's HEAD and whether the tree has
// uncommitted changes to tracked files.
func GitCommit(ctx context.Context, dir string) (commit string, dirty bool, err error) {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false, fmt.Errorf("read commit: %w", err)
	}
	commit = strings.TrimSpace(string(out))
	st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return commit, false, fmt.Errorf("read tree status: %w", err)
	}
	return commit, len(strings.TrimSpace(string(st))) > 0, nil
}

// ErrNoFigures is returned when a run printed no figure at all.
var ErrNoFigures = errors.New("no figures")

// Part is what one command of a run left: its Run and the CPU model its
// test binaries printed. `benchtable exec` writes one per command and
// `benchtable record` joins them into a File.
// Commit is the tree's when the command started (empty outside a git
// tree), so that a run's file names what was built, not what HEAD became
// while it ran.
type Part struct {
	CPU    string `json:"cpu,omitempty"`
	Commit string `json:"commit,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`
	Run    Run    `json:"run"`
}

// Assemble joins a run's parts, in order, into a File dated date, with
// the machine's facts (the CPU model from the parts when the machine does
// not say).
func Assemble(parts []Part, m Machine, commit string, dirty bool, date time.Time) File {
	f := File{Date: date.UTC().Truncate(time.Second), Commit: commit, Dirty: dirty, Machine: m}
	for _, p := range parts {
		if f.Machine.CPU == "" {
			f.Machine.CPU = p.CPU
		}
		f.Runs = append(f.Runs, p.Run)
	}
	return f
}
