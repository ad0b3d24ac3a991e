//go:build !race

package client

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// readNonblock reads from the non-blocking socket fd into p without the
// scheduler's system-call hand-off (entersyscall and exitsyscall, which
// let another thread take the P of a call that may block). The socket is
// non-blocking, so the call returns as soon as the kernel has copied what
// it holds; the loops make one per token. Under the race detector it is
// unix.Read, whose annotations tell the detector the buffer was written.
func readNonblock(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if errno != 0 {
		return -1, errno
	}
	return int(n), nil
}
