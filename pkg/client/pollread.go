package client

import (
	"errors"
	"io"
	"iter"
	"net"
	"os"
	"sync/atomic"
	"syscall"
)

// pollReader reads a TCP connection with one read system call per arrival
// of data. A net.Conn read that fills less than its buffer leaves the next
// Read to try the socket again, which on a stream that trickles one token
// at a time fails with EAGAIN before the goroutine waits for the poller:
// two system calls per token, and on a busy machine system calls are most of
// a streaming client's CPU. pollReader instead keeps one RawConn.Read open
// for a whole response, in a coroutine (iter.Pull): after a read
// that drained the socket (returned less than asked) it goes straight to
// the poller, which reports new data by edge, so nothing is missed; after a
// read that filled the buffer it reads again at once. Read runs the
// coroutine until it has read into the caller's buffer.
//
// The first Read of a response starts the coroutine and end stops it, so an
// idle connection has no goroutine. While the coroutine waits between Reads
// it holds the descriptor, and the connection's Close waits for it: end
// must be called, from the reading goroutine, before Close. To fail a Read
// in progress from another goroutine, set closing and close the connection.
type pollReader struct {
	closing atomic.Bool
	rc      syscall.RawConn
	want    []byte // the buffer of the Read in progress
	err     error  // the error that ended the coroutine
	next    func() (int, bool)
	stop    func()
}

// newPollReader returns a pollReader for conn when conn exposes its file
// descriptor (a *net.TCPConn), and false otherwise (a TLS connection).
func newPollReader(conn net.Conn) (*pollReader, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	return &pollReader{rc: rc}, true
}

// reads is the coroutine: each value is the byte count of one read into
// p.want.
func (p *pollReader) reads() iter.Seq[int] {
	return func(yield func(int) bool) {
		err := p.rc.Read(func(fd uintptr) bool {
			for {
				if p.closing.Load() {
					p.err = net.ErrClosed
					return true
				}
				n, err := syscall.Read(int(fd), p.want)
				switch {
				case errors.Is(err, syscall.EINTR):
					continue
				case errors.Is(err, syscall.EAGAIN):
					return false // wait for the poller
				case err != nil:
					p.err = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", err)}
					return true
				case n == 0:
					p.err = io.EOF
					return true
				}
				full := n == len(p.want)
				if !yield(n) {
					p.err = net.ErrClosed
					return true
				}
				if !full {
					return false // drained: wait for the next edge
				}
			}
		})
		if err != nil && p.err == nil {
			p.err = err
		}
	}
}

// Read implements io.Reader.
func (p *pollReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if p.next == nil {
		if p.err != nil {
			return 0, p.err
		}
		p.next, p.stop = iter.Pull(p.reads())
	}
	p.want = b
	n, ok := p.next()
	p.want = nil
	if !ok {
		if p.err == nil {
			p.err = io.EOF
		}
		return 0, p.err
	}
	return n, nil
}

// end stops the coroutine, if it runs; the next Read starts another. It
// must not run during a Read.
func (p *pollReader) end() {
	if p.stop == nil {
		return
	}
	p.stop()
	p.next, p.stop = nil, nil
	if errors.Is(p.err, net.ErrClosed) && !p.closing.Load() {
		p.err = nil // stopped by end, not by a failure
	}
}
