package main

import (
	"strings"
	"testing"
)

// TestGlobalFlagsRejectBadValues checks that a mistyped --log-level or
// --log-format is a usage error that names the flag, not a silent default.
func TestGlobalFlagsRejectBadValues(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad level", []string{"--log-level", "verbose", "version"}, "--log-level"},
		{"bad format", []string{"--log-format", "yaml", "version"}, "--log-format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCommand(t.Context(), tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %s", code, stderr, exitUsage, tt.want)
			}
		})
	}
	if code, stdout, _ := runCommand(t.Context(), "--log-level", "WARN", "--log-format", "JSON", "version"); code != exitOK || !strings.Contains(stdout, "fleetbench") {
		t.Errorf("valid upper-case values: exit %d, stdout %q", code, stdout)
	}
}

// TestReportBadFlagIsUsageError checks that report maps an unknown flag to
// the usage exit code, as every other command does.
func TestReportBadFlagIsUsageError(t *testing.T) {
	if code, _, _ := runCommand(t.Context(), "report", "--no-such-flag", "x"); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if code, _, stderr := runCommand(t.Context(), "report", "--sla", "-1s", "x"); code != exitUsage || !strings.Contains(stderr, "--sla") {
		t.Errorf("negative --sla: exit %d, stderr %q", code, stderr)
	}
}
