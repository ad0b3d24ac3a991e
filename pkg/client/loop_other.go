//go:build !linux

package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Event loops are Linux's (loop_linux.go); elsewhere every connection
// stays on Go's poller and these are never reached.

type loopPhase uint8

const (
	phHead loopPhase = iota
	phBody
	phDrain
	phDone
	phHandback
)

type loopConn struct{ dead atomic.Bool }

type loopExchange struct {
	r         *run
	st        *streamState
	wake      chan struct{}
	err       error
	nread     int64
	resp      *http.Response
	headersAt time.Time
	first     time.Time
	eof       bool
}

var errAnswered = errors.New("response before the whole request was sent")

// ReserveLoopProcs changes nothing: there are no event loops here.
func ReserveLoopProcs() (restore func()) { return func() {} }

func useLoops() bool               { return false }
func detach(net.Conn) *loopConn    { return nil }
func (c *loopConn) close()         {}
func (c *loopConn) reusable() bool { return false }
func (c *loopConn) send(context.Context, *run, *streamState, [][]byte) (*loopExchange, error) {
	return &loopExchange{}, net.ErrClosed
}
func (c *loopConn) wait(context.Context, *loopExchange) loopPhase { return phDone }
func (x *loopExchange) release(*run)                              {}
func (c *loopConn) handOver() (net.Conn, []byte, error)           { return nil, nil, net.ErrClosed }
