//go:build unix

package sweep

import (
	"os/exec"
	"syscall"
)

// killGroup runs cmd in its own process group and makes cancellation kill
// the whole group, so a shell's children (kubectl, sleep) die with it
// instead of outliving the timeout.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
