//go:build linux || darwin

package load

import (
	"strings"
	"syscall"
	"testing"
)

// TestCheckFileLimit lowers this process's open-file limits (a child's
// would do as well; the test restores them) and checks that a share above
// them is reported with both figures, and one within them is not.
func TestCheckFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 1024 {
		t.Skipf("hard open-file limit %d is too low to test with", orig.Max)
	}
	// Lowering the hard limit cannot be undone without privileges: lower
	// only the soft one and check it is raised back.
	low := orig
	low.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })

	soft, hard, err := RaiseFileLimit()
	if err != nil || soft != hard || hard != orig.Max {
		t.Fatalf("RaiseFileLimit = %d, %d, %v; want soft raised to the hard limit %d", soft, hard, err, orig.Max)
	}
	if err := CheckFileLimit(100); err != nil {
		t.Errorf("100 sessions under a limit of %d: %v", hard, err)
	}
	too := int(hard) // plus the reserve: over the limit
	err = CheckFileLimit(too)
	if err == nil {
		t.Fatalf("%d sessions under a limit of %d: no error", too, hard)
	}
	for _, want := range []string{"open-file limit", "too many open files", "hard"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
