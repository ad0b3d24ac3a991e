//go:build linux || darwin

package load

import (
	"fmt"
	"syscall"
)

// FileLimitReserve is the file descriptors a load process needs besides
// one connection per session: listeners, the coordinator's stream, logs,
// DNS, a dataset, connections being replaced.
const FileLimitReserve = 64

// RaiseFileLimit sets the soft RLIMIT_NOFILE to the hard limit and returns
// both. The Go runtime already does this at start on Linux and macOS
// (since Go 1.19); doing it here makes it explicit, and the figures are
// what CheckFileLimit compares with.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("read open-file limit: %w", err)
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return rl.Cur, rl.Max, fmt.Errorf("raise open-file limit to %d: %w", rl.Max, err)
		}
	}
	return rl.Cur, rl.Max, nil
}

// CheckFileLimit says, in one line, when this process cannot open a
// connection per session: sessions plus FileLimitReserve above the soft
// open-file limit (raised to the hard one first). nil when they fit.
func CheckFileLimit(sessions int) error {
	soft, hard, err := RaiseFileLimit()
	if err != nil {
		return err
	}
	need := uint64(sessions) + FileLimitReserve
	if need <= soft {
		return nil
	}
	return fmt.Errorf("the open-file limit (soft %d, hard %d) is below the %d descriptors %d sessions need: "+
		"connections will fail with 'too many open files'; raise the hard limit (ulimit -Hn, the container runtime's "+
		"LimitNOFILE) or spread the sessions over more agents", soft, hard, need, sessions)
}
