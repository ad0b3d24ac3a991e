//go:build !(linux || darwin)

package load

// FileLimitReserve is the file descriptors a load process needs besides
// one connection per session.
const FileLimitReserve = 64

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE.
func RaiseFileLimit() (soft, hard uint64, err error) { return 0, 0, nil }

// CheckFileLimit has no limit to check here.
func CheckFileLimit(int) error { return nil }
