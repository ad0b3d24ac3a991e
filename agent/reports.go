package agent

import (
	"time"

	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// pending is a report kept until acked.
type pending struct {
	seq uint64
	w   *record.Window
}

// flush drains the recorder into reports and sends them with a watermark.
// The watermark is read before the drain, so every turn it covers is in
// this or an earlier report.
func (l *loop) flush() {
	if l.eng == nil {
		return
	}
	wm, ok := l.eng.e.Watermark()
	for _, w := range l.a.rec.Drain() {
		l.seq++
		l.pending = append(l.pending, pending{seq: l.seq, w: w})
		l.a.metrics.drained(w)
		if l.a.onReport != nil {
			l.a.onReport(l.seq, w)
		}
		if l.link != nil {
			l.link.send(report{Seq: l.seq, Window: w})
			l.a.metrics.reports.Inc()
		}
	}
	l.a.metrics.pending.Set(float64(len(l.pending)))
	var st load.Stats
	if !l.eng.finished {
		st = l.eng.e.Stats()
	}
	l.a.metrics.streams.Set(float64(st.InFlight))
	l.a.metrics.sessions.Set(float64(st.Sessions))
	if ok {
		l.lastWM = &watermark{Window: wm, Seq: l.seq, Finished: l.eng.finished, Epoch: l.eng.epoch}
		if l.link != nil {
			l.link.send(*l.lastWM)
		}
	}
}

// lastAcksWait bounds how long a stopping agent waits for the acks of its
// last reports.
const lastAcksWait = 5 * time.Second

// awaitAcks waits until the coordinator acked every report sent, the
// link ends or timeout passes. A coordinator that finished its run still
// applies the reports its agents send after the stop, and acks them, until
// their streams end: closing the stream before the acks would leave the
// agent unable to tell applied from lost.
func (l *loop) awaitAcks(timeout time.Duration) {
	if len(l.pending) == 0 {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for len(l.pending) > 0 {
		select {
		case m := <-l.link.in:
			if a, ok := m.(ack); ok {
				l.ack(a.Seq)
			}
		case <-l.link.done:
			return
		case <-t.C:
			l.logger.Warn("coordinator did not ack the last reports", "unacked", len(l.pending), "waited", timeout)
			return
		}
	}
}

// shutdown stops the engine, waits for it, sends the last reports when a
// link is up, waits for their acks and lets the link flush.
func (l *loop) shutdown() {
	if l.eng != nil && l.eng.started && !l.eng.finished {
		if l.eng.cancel != nil {
			l.eng.cancel()
		}
		<-l.eng.done
		l.eng.finished = true
	}
	l.flush()
	for l.nbg > 0 {
		select {
		case <-l.built:
		case <-l.checks:
		}
		l.nbg--
	}
	if l.link != nil {
		l.awaitAcks(lastAcksWait)
		l.link.closeSend(5 * time.Second)
	}
	l.a.metrics.connected.Set(0)
	// What this process reported, for an operator (or a test) to compare
	// with the coordinator's applied count: unacked reports are lost
	// unless the coordinator saw them before it went away.
	l.logger.Info("agent done", "reports_sent", l.seq, "reports_unacked", len(l.pending))
}
