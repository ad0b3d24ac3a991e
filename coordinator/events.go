package coordinator

import "context"

// outQueue is a connection's outbound queue length. A connection whose
// queue is full is closed (its agent reconnects and resumes).
const outQueue = 1024

// event is something the loop must handle.
type event interface{ isEvent() }

// joinEvent asks the loop to admit an agent on a new connection.
type joinEvent struct {
	hello hello
	conn  *conn
	reply chan error
}

// msgEvent carries one inbound message of a connection.
type msgEvent struct {
	conn *conn
	msg  any
}

// isReport reports whether e is an agent's report, merged or refused.
func isReport(e event) bool {
	if m, ok := e.(msgEvent); ok {
		switch m.msg.(type) {
		case report, badReport:
			return true
		}
	}
	return false
}

// leaveEvent says a connection's stream ended.
type leaveEvent struct {
	conn *conn
	err  error
}

type concurrencyEvent struct{ level int }

// lostEvent says an agent is gone for good (its pod failed), so the loop
// need not wait for its heartbeats to stop.
type lostEvent struct{ id, reason string }

func (joinEvent) isEvent()        {}
func (msgEvent) isEvent()         {}
func (leaveEvent) isEvent()       {}
func (concurrencyEvent) isEvent() {}
func (lostEvent) isEvent()        {}

// conn is one agent stream as the loop sees it. out is written only by the
// loop; closed (kick) is closed once by the loop to end the stream.
type conn struct {
	agentID string
	out     chan any
	kick    chan struct{}
	kicked  bool
}

func newConn() *conn {
	return &conn{out: make(chan any, outQueue), kick: make(chan struct{})}
}

// send queues m without blocking; a full queue closes the connection.
func (cn *conn) send(m any) bool {
	if cn.kicked {
		return false
	}
	select {
	case cn.out <- m:
		return true
	default:
		cn.close()
		return false
	}
}

func (cn *conn) close() {
	if !cn.kicked {
		cn.kicked = true
		close(cn.kick)
	}
}

// submit hands an event to the loop, giving up when ctx is done or the run
// is over.
func (c *Coordinator) submit(ctx context.Context, e event) error {
	select {
	case c.events <- e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrRunOver
	}
}

// join admits an agent; called by the edge for each new stream. The
// welcome is the first message queued on the returned connection.
func (c *Coordinator) join(ctx context.Context, h hello) (*conn, error) {
	cn := newConn()
	cn.agentID = h.ID
	reply := make(chan error, 1)
	if err := c.submit(ctx, joinEvent{hello: h, conn: cn, reply: reply}); err != nil {
		return nil, err
	}
	select {
	case err := <-reply:
		if err != nil {
			return nil, err
		}
		return cn, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, ErrRunOver
	}
}
