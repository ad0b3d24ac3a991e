package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// h1Transport is the HTTP/1.1 path, used unless Config.HTTP2 is set. Each
// Stream call takes a connection from the pool and writes its request in
// one system call. On an event loop's connection (loop_linux.go) the loop
// reads the response; otherwise the call reads it on its own goroutine,
// with readResponse parsing the head and chunkedBody the body. net/http's
// Transport would add, for every request, hand-offs to a writer and a reader
// goroutine that every connection keeps, and for every streamed token a
// mutex and more buffer layers; at thousands of concurrent streams on a
// small machine those show up as client-added latency.
type h1Transport struct {
	addr      string      // host:port to dial
	head      []byte      // request line, Host and the fixed headers
	fixed     []headerKV  // the fixed headers, for requests that add their own
	tlsConfig *tls.Config // nil for http://
	dialer    net.Dialer
	pool      connPool
	loops     bool // connections go to the event loops (loop_linux.go)
}

// headerKV is one request header, its name in canonical form.
type headerKV struct{ name, value string }

// h1Excluded are header names a caller may not set: the transport writes
// them from the request itself.
var h1Excluded = []string{"Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection"}

// newH1Transport prepares the request head for u: request line, Host, then
// User-Agent, Content-Type and Accept, then the configured headers (which
// may replace those three), then basic auth from the URL's user info unless
// an Authorization header is configured.
func newH1Transport(cfg Config, u *url.URL, static http.Header, maxConns int) *h1Transport {
	t := &h1Transport{
		addr:   canonicalAddr(u),
		dialer: net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: tcpKeepAlive},
		pool:   connPool{max: maxConns},
	}
	t.loops = !cfg.BlockingReads && u.Scheme == "http" && useLoops()
	if u.Scheme == "https" {
		t.tlsConfig = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	}
	fixed := []headerKV{{"User-Agent", "fleetbench"}, {"Content-Type", "application/json"}, {"Accept", "text/event-stream"}}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range static {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range static[k] {
			fixed = setHeader(fixed, k, v)
		}
	}
	if u.User != nil && !hasHeader(fixed, "Authorization") {
		pass, _ := u.User.Password()
		auth := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pass))
		fixed = append(fixed, headerKV{"Authorization", "Basic " + auth})
	}
	t.fixed = fixed
	head := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	t.head = appendHeaders(head, fixed)
	return t
}

// canonicalAddr is u's host:port, with the scheme's default port.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// setHeader sets name (any case) to value, replacing an earlier value.
func setHeader(h []headerKV, name, value string) []headerKV {
	name = http.CanonicalHeaderKey(name)
	if slices.Contains(h1Excluded, name) {
		return h
	}
	for i := range h {
		if h[i].name == name {
			h[i].value = value
			return h
		}
	}
	return append(h, headerKV{name, value})
}

func hasHeader(h []headerKV, name string) bool {
	return slices.ContainsFunc(h, func(kv headerKV) bool { return kv.name == name })
}

func appendHeaders(dst []byte, h []headerKV) []byte {
	for _, kv := range h {
		dst = append(dst, kv.name...)
		dst = append(dst, ": "...)
		dst = append(dst, kv.value...)
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// appendHead appends the request head for a body of n bytes with the
// request's own headers to dst.
func (t *h1Transport) appendHead(dst []byte, extra map[string]string, n int) ([]byte, error) {
	if len(extra) == 0 {
		dst = append(dst, t.head...)
	} else {
		h := slices.Clone(t.fixed)
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range extra {
				if !yield(k) {
					return
				}
			}
		}) {
			// The value may be a secret: name the header, never its value.
			if !validHeaderName(k) {
				return dst, fmt.Errorf("build request: header name %q is invalid", k)
			}
			if strings.ContainsAny(extra[k], "\r\n\x00") {
				return dst, fmt.Errorf("build request: header %q has a control character in its value", k)
			}
			h = setHeader(h, k, extra[k])
		}
		end := len(t.head) - len(appendHeaders(nil, t.fixed))
		dst = append(dst, t.head[:end]...)
		dst = appendHeaders(dst, h)
	}
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, "\r\n\r\n"...), nil
}

// h1Conn is one pooled connection with its read buffer.
type h1Conn struct {
	lc     *loopConn // on an event loop; conn, br and cr are then unused
	conn   net.Conn
	br     *bufio.Reader
	cr     countingReader
	head   []byte // scratch for request heads
	reused bool   // it was pooled before the current request: not dialed for it
	chunks chunkedBody
}

// close closes the connection.
func (c *h1Conn) close() {
	if c.lc != nil {
		c.lc.close()
		return
	}
	_ = c.conn.Close()
}

// abort closes the connection from another goroutine, failing the read or
// write in progress, if any.
func (c *h1Conn) abort() { c.close() }

// countingReader counts the bytes read from the connection, so a failure on
// a reused connection can tell "the server closed it while idle" (nothing
// read: safe to send again) from a failure mid-response.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (t *h1Transport) dial(ctx context.Context) (*h1Conn, error) {
	conn, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	if t.loops && t.tlsConfig == nil {
		if lc := detach(conn); lc != nil {
			return &h1Conn{lc: lc}, nil
		}
	}
	if t.tlsConfig != nil {
		tc := tls.Client(conn, t.tlsConfig)
		hctx, cancel := context.WithTimeout(ctx, t.dialer.Timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("%w: %w", errTLSHandshake, err)
		}
		conn = tc
	}
	c := &h1Conn{conn: conn}
	c.cr.r = conn
	c.br = bufio.NewReaderSize(&c.cr, readBufferSize)
	return c, nil
}

// exchange is one request's use of a connection: get, send, read the head,
// and finally give the connection back or close it.
type exchange struct {
	t    *h1Transport
	c    *h1Conn
	stop func() bool // unregisters the close-on-cancel hook
	resp *http.Response
	body io.Reader // the response body: c.chunks when chunked, else resp.Body
	// pushed: an event loop read the response (lx); the run holds its
	// outcome unless aborted says the request's context ended first.
	pushed, aborted bool
	lx              *loopExchange
	noReuse         bool // the request was not all written
}

// noStop is the exchange's stop for connections on an event loop, which
// watch the context themselves.
func noStop() bool { return true }

// maxRetries bounds how often a request is sent again after a reused
// connection turned out closed by the server before anything was read.
const maxRetries = 2

// roundTrip sends req on a pooled connection (retrying on a fresh one when a
// reused connection was closed by the server while idle) and reads the
// response head. The connection is closed when ctx is done. On success the
// caller reads x.resp.Body and calls x.finish. body is req's body, built
// by the caller before it started the clock; roundTrip releases it.
func (t *h1Transport) roundTrip(ctx context.Context, cl *Client, req *Request, body *requestBody, r *run, st *streamState) (*exchange, error) {
	for attempt := 0; ; attempt++ {
		if body == nil {
			body = cl.bodies.newBody(cl.body, req)
		}
		x, err, retry := t.try(ctx, req, body, r, st)
		body = nil
		if err == nil {
			return x, nil
		}
		if !retry || attempt == maxRetries || ctx.Err() != nil {
			return nil, err
		}
	}
}

// try sends req once; it releases body. On an event loop's connection the
// loop reads the response for r into st.
func (t *h1Transport) try(ctx context.Context, req *Request, body *requestBody, r *run, st *streamState) (x *exchange, err error, retry bool) {
	c, err := t.pool.get(ctx, t.dial)
	if err != nil {
		_ = body.Close()
		return nil, err, false
	}
	x = &exchange{t: t, c: c, stop: noStop}
	if c.lc == nil {
		// A blocking read: the request's own context ends it (its
		// drain, its timeouts) by closing the connection.
		ctx = r.cancelable(ctx)
		x.stop = context.AfterFunc(ctx, c.abort)
	}
	c.head, err = t.appendHead(c.head[:0], req.Headers, body.n)
	if err != nil {
		_ = body.Close()
		x.close()
		return nil, err, false
	}
	if c.lc != nil {
		return t.tryLoop(ctx, x, body, r, st)
	}
	c.cr.n = 0
	bufs := net.Buffers{c.head, (*body.buf)[:body.n]}
	_, err = bufs.WriteTo(c.conn)
	_ = body.Close() // written: the buffer goes back to the pool
	return t.readHead(x, err)
}

// readHead reads the response head for x once the request is written
// (werr: the write's error).
func (t *h1Transport) readHead(x *exchange, werr error) (_ *exchange, err error, retry bool) {
	c, err := x.c, werr
	if err == nil {
		// The body is this connection read through c.br; finish closes or
		// pools the connection, so the body needs no Close.
		x.resp, err = readResponse(c.br) //nolint:bodyclose // see above
		var ne net.Error
		if err != nil && !closedByPeer(err) && !errors.As(err, &ne) {
			// Not the connection failing: the head itself was garbage.
			err = fmt.Errorf("%w: %w", errMalformedResponse, err)
		}
	}
	if err != nil {
		retry = c.reused && c.cr.n == 0 && closedByPeer(err)
		x.close()
		return nil, err, retry
	}
	x.body = x.resp.Body
	if slices.Equal(x.resp.TransferEncoding, []string{"chunked"}) {
		// ReadResponse has read only the head; decode the body here.
		c.chunks.reset(c.br)
		x.body = &c.chunks
	}
	return x, nil, false
}

// tryLoop runs the exchange on c's event loop: it sends the request, then
// waits for the loop to read the response, and goes on as try does when
// the loop hands the response back.
func (t *h1Transport) tryLoop(ctx context.Context, x *exchange, body *requestBody, r *run, st *streamState) (_ *exchange, err error, retry bool) {
	c := x.c
	lx, err := c.lc.send(ctx, r, st, [][]byte{c.head, (*body.buf)[:body.n]})
	_ = body.Close()
	defer lx.release(r) // before the connection can go back to the pool
	if errors.Is(err, errAnswered) {
		x.noReuse, err = true, nil
	}
	if err != nil {
		// send closed the connection and the loop let go of lx.
		retry = c.reused && lx.nread == 0 && closedByPeer(err)
		x.close()
		return nil, err, retry
	}
	switch phase := c.lc.wait(ctx, lx); {
	case phase == phHandback:
		conn, left, err := c.lc.handOver()
		if err != nil {
			x.close()
			return nil, err, false
		}
		c.lc, c.conn = nil, conn
		c.cr = countingReader{r: io.MultiReader(bytes.NewReader(left), conn), n: int64(len(left))}
		c.br = bufio.NewReaderSize(&c.cr, readBufferSize)
		x.stop = context.AfterFunc(r.cancelable(ctx), c.abort)
		return t.readHead(x, nil)
	case lx.resp == nil:
		// No head: the connection failed or ctx ended first.
		err = lx.err
		if phase != phDone || err == nil {
			err = fmt.Errorf("read response: %w", net.ErrClosed)
		}
		retry = phase == phDone && c.reused && lx.nread == 0 && closedByPeer(err)
		x.close()
		return nil, err, retry
	default:
		x.resp, x.pushed, x.lx = lx.resp, true, lx
		x.aborted = phase != phDone
		return x, nil, false
	}
}

// readResponse reads a response head, skipping informational (1xx)
// responses.
func readResponse(br *bufio.Reader) (*http.Response, error) {
	// Wait for the head's first bytes, then try the fast path on what came.
	if _, err := br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // as http.ReadResponse says it
		}
		return nil, err
	}
	if resp := readHeadFast(br); resp != nil {
		return resp, nil
	}
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// closedByPeer reports whether err is what a write to, or a read from, a
// connection the server has closed returns.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// finish ends the exchange: the connection goes back to the pool when the
// body was read to its end (eof), the server did not ask to close, nothing
// is left unread and the request was not cancelled; otherwise it is closed.
func (x *exchange) finish(eof bool) {
	if x.c.lc != nil {
		if eof && !x.noReuse && !x.resp.Close && x.c.lc.reusable() {
			x.t.pool.put(x.c)
			return
		}
		x.close()
		return
	}
	if eof && !x.noReuse && !x.resp.Close && x.c.br.Buffered() == 0 && x.stop() {
		x.t.pool.put(x.c)
		return
	}
	x.close()
}

func (x *exchange) close() {
	x.stop()
	x.t.pool.discard(x.c)
}

// warm opens up to n connections (fewer when the pool is capped) and leaves
// them idle.
func (t *h1Transport) warm(ctx context.Context, n int) error {
	if t.pool.max > 0 {
		n = min(n, t.pool.max)
	}
	conns := make([]*h1Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { conns[i], errs[i] = t.pool.get(ctx, t.dial) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			t.pool.put(c)
		}
	}
	return warmError(errs)
}

// connPool keeps idle connections and caps the open ones at max (0: no
// cap). A request that finds no idle connection dials, unless the cap is
// reached; then it waits, first come first served, for a connection to come
// back or for a slot to dial. Safe for concurrent use.
type connPool struct {
	mu      sync.Mutex
	idle    []*h1Conn
	open    int // dialing, in use and idle
	max     int
	waiters []chan *h1Conn // nil sent: a slot to dial
}

// get returns an idle connection or a new one from dial.
func (p *connPool) get(ctx context.Context, dial func(context.Context) (*h1Conn, error)) (*h1Conn, error) {
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if c.lc != nil && c.lc.dead.Load() {
			// The server closed it while idle (its loop saw it): its slot
			// is this request's to use.
			p.open--
			c.close()
			continue
		}
		p.mu.Unlock()
		return c, nil
	}
	if p.max == 0 || p.open < p.max {
		p.open++
		p.mu.Unlock()
		return p.dial(ctx, dial)
	}
	w := make(chan *h1Conn, 1)
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	select {
	case c := <-w:
		if c == nil {
			return p.dial(ctx, dial)
		}
		return c, nil
	case <-ctx.Done():
		p.mu.Lock()
		if i := slices.Index(p.waiters, w); i >= 0 {
			p.waiters = slices.Delete(p.waiters, i, i+1)
			p.mu.Unlock()
			return nil, ctx.Err()
		}
		p.mu.Unlock()
		// Handed something just as ctx ended: pass it on.
		if c := <-w; c != nil {
			p.put(c)
		} else {
			p.mu.Lock()
			p.open--
			p.handOffSlot()
			p.mu.Unlock()
		}
		return nil, ctx.Err()
	}
}

// dial dials in a slot already counted in open, giving it back on failure.
func (p *connPool) dial(ctx context.Context, dial func(context.Context) (*h1Conn, error)) (*h1Conn, error) {
	c, err := dial(ctx)
	if err != nil {
		p.mu.Lock()
		p.open--
		p.handOffSlot()
		p.mu.Unlock()
		return nil, err
	}
	return c, nil
}

// put makes c available again; from now on it counts as reused.
func (p *connPool) put(c *h1Conn) {
	c.reused = true
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = slices.Delete(p.waiters, 0, 1)
		w <- c
		return
	}
	p.idle = append(p.idle, c)
}

// discard closes c and frees its slot.
func (p *connPool) discard(c *h1Conn) {
	c.close()
	p.mu.Lock()
	p.open--
	p.handOffSlot()
	p.mu.Unlock()
}

// handOffSlot lets the first waiter dial when the cap allows. Called with
// p.mu held.
func (p *connPool) handOffSlot() {
	if len(p.waiters) == 0 || (p.max > 0 && p.open >= p.max) {
		return
	}
	p.open++
	w := p.waiters[0]
	p.waiters = slices.Delete(p.waiters, 0, 1)
	w <- nil
}

// closeIdle closes every idle connection.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	for range idle {
		p.handOffSlot()
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}
