//go:build !unix

package sweep

import "os/exec"

// killGroup is a no-op where process groups are not available; WaitDelay
// still bounds the wait for the output pipes.
func killGroup(*exec.Cmd) {}
