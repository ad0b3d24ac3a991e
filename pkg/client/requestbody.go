package client

import (
	"errors"
	"io"
	"net"
	"sync"
)

// maxPooledBody bounds the body buffers kept for reuse, so that one huge
// prompt does not pin its buffer for the rest of the run.
const maxPooledBody = 1 << 20

// errBodyClosed is returned by a read of a request body after the transport
// closed it. net/http does not read a body after closing it; the error
// makes sure a released buffer is never read.
var errBodyClosed = errors.New("read request body: closed")

// bodyPool recycles request body buffers. A document-chat body is 10 to
// 20 KB and is needed only until the transport has written it, so with the
// pool a body costs memory while it is being written rather than for the
// whole stream, and steady-state requests do not allocate one. Safe for
// concurrent use.
type bodyPool struct {
	pool sync.Pool // *[]byte
	// released, when set (by tests, before the first request), is called
	// with each buffer as it is given back.
	released func([]byte)
}

// newBody returns req's body built by t into a pooled buffer.
func (p *bodyPool) newBody(t *bodyTemplate, req *Request) *requestBody {
	buf, _ := p.pool.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	if size := t.size(req); cap(*buf) < size {
		*buf = make([]byte, 0, size)
	}
	*buf = t.build((*buf)[:0], req)
	return &requestBody{pool: p, buf: buf, n: len(*buf)}
}

func (p *bodyPool) put(buf *[]byte) {
	if p.released != nil {
		p.released(*buf)
	}
	if cap(*buf) <= maxPooledBody {
		p.pool.Put(buf)
	}
}

// requestBody is a request's JSON body in a pooled buffer. It gives the
// buffer back to its pool once it has been read to the end or closed,
// whichever comes first, so an in-flight stream does not hold its body. The
// transport may Close concurrently with a Read, so the state is guarded by a
// mutex; a write straight from the buffer (writeTo) delays the release until
// it returns.
type requestBody struct {
	pool *bodyPool
	n    int // the body's length

	mu      sync.Mutex
	buf     *[]byte // nil once given back
	off     int     // bytes read
	closed  bool
	writing bool // writeTo is writing from buf without the lock
}

var _ io.ReadCloser = (*requestBody)(nil)

// Read implements io.Reader.
func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errBodyClosed
	}
	if b.off == b.n {
		return 0, io.EOF
	}
	n := copy(p, (*b.buf)[b.off:])
	b.off += n
	b.releaseIfDone()
	return n, nil
}

// Close implements io.Closer; it may be called more than once.
func (b *requestBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.releaseIfDone()
	return nil
}

// writeTo writes at most limit unread bytes to w straight from the buffer.
func (b *requestBody) writeTo(w io.Writer, limit int64) (int64, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, errBodyClosed
	}
	if b.off == b.n {
		b.mu.Unlock()
		return 0, nil
	}
	rest := (*b.buf)[b.off:b.n]
	if int64(len(rest)) > limit {
		rest = rest[:limit]
	}
	b.writing = true
	b.mu.Unlock()

	n, err := w.Write(rest)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.writing = false
	b.off += n
	b.releaseIfDone()
	return int64(n), err
}

// releaseIfDone gives the buffer back once it is read or closed and no
// write from it is in progress. Called with b.mu held.
func (b *requestBody) releaseIfDone() {
	if b.buf == nil || b.writing || (b.off < b.n && !b.closed) {
		return
	}
	b.pool.put(b.buf)
	b.buf = nil
}

// tcpConn is a client connection that writes request bodies straight from
// their buffers. net/http writes a body of known length as
// io.Copy(conn, io.LimitReader(body, n)) once its 4 KB write buffer is full,
// which, through *net.TCPConn's generic ReadFrom, allocates a copy buffer of
// up to 32 KB for every request (a body that is an io.WriterTo does not
// help: the LimitReader hides it). ReadFrom spots a LimitedReader over a
// requestBody and writes the body's bytes in one call instead.
type tcpConn struct{ *net.TCPConn }

// ReadFrom implements io.ReaderFrom.
func (c tcpConn) ReadFrom(r io.Reader) (int64, error) {
	lr, ok := r.(*io.LimitedReader)
	if !ok {
		return c.TCPConn.ReadFrom(r)
	}
	b, ok := lr.R.(*requestBody)
	if !ok {
		return c.TCPConn.ReadFrom(r)
	}
	n, err := b.writeTo(c.TCPConn, lr.N)
	lr.N -= n
	if err != nil || lr.N == 0 {
		return n, err
	}
	// A body shorter than the limit: let the generic path find its end.
	m, err := c.TCPConn.ReadFrom(lr)
	return n + m, err
}
