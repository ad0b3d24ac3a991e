package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUIBaselineUsageErrors checks a bad --ui-baseline is a one-line
// usage error on every command that takes it, before anything starts.
func TestUIBaselineUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"by_level": {"eighty": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"run malformed", "by_level key", []string{"run", "--concurrency", "2", "--out", out, "--metrics-listen", "127.0.0.1:0", "--ui-baseline", bad, "--dry-run"}},
		{"run missing", "no such file", []string{"run", "--concurrency", "2", "--out", out, "--metrics-listen", "127.0.0.1:0", "--ui-baseline", filepath.Join(dir, "none.json"), "--dry-run"}},
		{"run without metrics port", "--metrics-listen", []string{"run", "--concurrency", "2", "--out", out, "--ui-baseline", bad, "--dry-run"}},
		{"coordinator malformed", "by_level key", []string{"coordinator", "--target", "http://127.0.0.1:1", "--model", "m", "--metrics-listen", "127.0.0.1:0", "--ui-baseline", bad, "--dry-run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t.Context(), tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
				t.Errorf("exit %d, want %d and one line saying %q\nstdout:\n%s\nstderr:\n%s", code, exitUsage, tc.want, stdout, stderr)
			}
		})
	}
}
