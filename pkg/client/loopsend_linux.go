//go:build linux

package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// errAnswered stops a write the server answered before taking it all.
var errAnswered = errors.New("response before the whole request was sent")

// write writes bufs, waiting for room in the socket as needed. It returns
// errAnswered when the loop's part of the exchange ended first.
func (c *loopConn) write(ctx context.Context, x *loopExchange, bufs [][]byte) error {
	for len(bufs) > 0 {
		n, err := unix.Writev(c.fd, bufs)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			if err := c.waitWritable(ctx, x); err != nil {
				return err
			}
			continue
		case err != nil:
			return &net.OpError{Op: "write", Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError("writev", err)}
		}
		for n > 0 && len(bufs) > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return nil
}

func (c *loopConn) waitWritable(ctx context.Context, x *loopExchange) error {
	c.mu.Lock()
	if c.x != x {
		c.mu.Unlock()
		return errAnswered
	}
	x.wantOut = true
	c.setInterest(true)
	c.mu.Unlock()
	select {
	case <-x.wake:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// send arms the connection with an exchange for r and st and writes bufs,
// waiting for room in the socket as needed. r's tokens move into the
// exchange until release. The exchange lives in the
// connection (its state shares the connection's cache lines) until the
// connection is pooled again. A write error closes the connection;
// errAnswered says the loop finished with the response before the request
// was all written.
func (c *loopConn) send(ctx context.Context, r *run, st *streamState, bufs [][]byte) (*loopExchange, error) {
	c.mu.Lock()
	x := &c.ex
	wake := x.wake
	if wake == nil {
		wake = make(chan struct{}, 1)
	}
	select {
	case <-wake: // a stale signal of the previous exchange
	default:
	}
	*x = loopExchange{r: r, st: st, wake: wake, tok: *r.tok}
	r.tok = &x.tok
	if c.closed || c.dead.Load() {
		// The server closed it while it was idle, after the pool handed
		// it out: as a write to it would fail (and be retried).
		c.mu.Unlock()
		c.close()
		return x, fmt.Errorf("write request: %w", io.EOF)
	}
	c.pb, c.stash = pushBody{}, c.stash[:0]
	c.setInterest(false) // an interest an earlier exchange left behind
	c.x = x
	c.mu.Unlock()
	err := c.write(ctx, x, bufs)
	if err != nil && !errors.Is(err, errAnswered) {
		c.mu.Lock()
		answered := c.x != x // the loop finished with the response first
		c.mu.Unlock()
		if answered {
			return x, errAnswered
		}
		c.abort(x)
	}
	return x, err
}

// wait waits until the loop is done with x's response or hands it back
// (phDone, phHandback), or until ctx ends or the drain after [DONE]
// outlasts drainTimeout: the connection is then closed and the phase
// reached is returned (phHead, phBody or phDrain).
func (c *loopConn) wait(ctx context.Context, x *loopExchange) loopPhase {
	var drain *time.Timer
	var drained <-chan time.Time
	defer func() {
		if drain != nil {
			drain.Stop()
		}
	}()
	for {
		c.mu.Lock()
		phase := x.phase
		c.mu.Unlock()
		switch phase {
		case phDone, phHandback:
			return phase
		case phDrain:
			if drain == nil {
				drain = time.NewTimer(drainTimeout)
				drained = drain.C
			}
		}
		select {
		case <-x.wake:
		case <-ctx.Done():
			return c.abort(x)
		case <-drained:
			return c.abort(x)
		}
	}
}

// release gives r its tokens back from x, once the loop is done with x
// (wait returned, or send failed): the connection may then carry another
// exchange.
func (x *loopExchange) release(r *run) {
	if r.tok == &x.tok {
		r.own, x.tok = x.tok, tokens{}
		r.tok = &r.own
	}
}

// abort takes the exchange back from the loop and closes the connection;
// it returns the phase the exchange had reached.
func (c *loopConn) abort(x *loopExchange) loopPhase {
	c.mu.Lock()
	defer c.mu.Unlock()
	phase := x.phase
	c.closeLocked()
	return phase
}
