package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testEnvRE matches a fleetbench environment variable's name.
var testEnvRE = regexp.MustCompile(`\bFLEETBENCH_[A-Z0-9_]*[A-Z0-9]\b`)

// TestTestingDocsListEveryVariable checks that docs/testing.md names, in
// backquotes, every FLEETBENCH_* variable that a _test.go file or a test
// helper under internal/testutil reads or sets, so a knob added to a test
// cannot stay undocumented.
func TestTestingDocsListEveryVariable(t *testing.T) {
	doc, err := os.ReadFile("docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string][]string{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "gen", "out", "bin", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		helper := strings.HasPrefix(filepath.ToSlash(path), "internal/testutil/") && strings.HasSuffix(path, ".go")
		if !strings.HasSuffix(path, "_test.go") && !helper {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range testEnvRE.FindAllString(string(b), -1) {
			if !slices.Contains(used[name], path) {
				used[name] = append(used[name], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must see the tiers' own switches, or it read nothing.
	for _, name := range []string{"FLEETBENCH_SOAK", "FLEETBENCH_REQUIRE_KUBE", "FLEETBENCH_TEST_AS_MAIN"} {
		if used[name] == nil {
			t.Errorf("no test file mentions %s: the walk is broken", name)
		}
	}
	for name, files := range used {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/testing.md does not list `%s` (used in %s)", name, strings.Join(files, ", "))
		}
	}
}
