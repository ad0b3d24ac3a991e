package benchresult

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Main runs the benchtable command with args (without the program's
// name): exec, record or table. An *exec.ExitError from exec is the
// benchmark command's own failure, for the caller to exit with its code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: exec, record or table")
	}
	switch args[0] {
	case "exec":
		return cmdExec(ctx, args[1:], stdout, stderr)
	case "record":
		return cmdRecord(ctx, args[1:], stdout)
	case "table":
		return cmdTable(args[1:])
	default:
		return fmt.Errorf("unknown subcommand %q: want exec, record or table", args[0])
	}
}

// cmdExec runs a benchmark command and writes its Part.
func cmdExec(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	part := fs.String("part", "", "write the command's figures to this file (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *part == "" || fs.NArg() == 0 {
		return errors.New("exec: want -part FILE -- COMMAND")
	}
	// Outside a git tree (the benchmark bundle) the commit stays empty and
	// record's -commit says it.
	commit, dirty, _ := GitCommit(ctx, ".")
	run, cpu, runErr := Exec(ctx, fs.Args(), stdout, stderr)
	b, err := json.MarshalIndent(Part{CPU: cpu, Commit: commit, Dirty: dirty, Run: run}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode part: %w", err)
	}
	if err := os.WriteFile(*part, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write part: %w", err)
	}
	return runErr
}

// cmdRecord joins parts into a results file.
func cmdRecord(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	out := fs.String("out", "bench/results", "folder of the results files")
	commit := fs.String("commit", "", "the commit measured (default: the first part's, else the working tree's HEAD)")
	dirty := fs.Bool("dirty", false, "with -commit: the tree had uncommitted changes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("record: want the parts' files")
	}
	parts := make([]Part, 0, fs.NArg())
	for _, path := range fs.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read part: %w", err)
		}
		var p Part
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("decode part %s: %w", filepath.Base(path), err)
		}
		parts = append(parts, p)
	}
	c, d := *commit, *dirty
	if c == "" && parts[0].Commit != "" {
		c, d = parts[0].Commit, parts[0].Dirty
	}
	if c == "" {
		var err error
		if c, d, err = GitCommit(ctx, "."); err != nil {
			return err
		}
	}
	f := Assemble(parts, Facts(""), c, d, time.Now())
	n := 0
	for _, r := range f.Runs {
		n += len(r.Benchmarks)
	}
	if n == 0 {
		return fmt.Errorf("record: %w", ErrNoFigures)
	}
	path, err := f.Write(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "benchtable: %d figures of %d commands in %s\n", n, len(f.Runs), path)
	return nil
}

// cmdTable regenerates the table.
func cmdTable(args []string) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	results := fs.String("results", "bench/results", "folder of the results files")
	out := fs.String("out", "docs/benchmarks.md", "the table's file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := ReadDir(*results)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := WriteTable(&b, files, Goals, Pairs); err != nil {
		return err
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
