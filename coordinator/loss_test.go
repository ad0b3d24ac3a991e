package coordinator

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
)

func TestJitterBounds(t *testing.T) {
	for _, u := range []float64{0, 0.5, 0.999} {
		d := jitter(time.Second, u)
		if d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Errorf("jitter(1s, %v) = %v, want within ±20%%", u, d)
		}
	}
}

// TestSilentAgentLostWithinTimeout runs the coordinator's loop in a
// synctest bubble: one agent heartbeats, the other falls silent; the
// silent one is declared lost (its stream closed) after the heartbeat
// timeout, not before, and its share moves to the survivor.
func TestSilentAgentLostWithinTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Config{
			Agents: 2, HeartbeatInterval: time.Second, HeartbeatTimeout: 3 * time.Second,
			Stages: []Stage{{Level: 4, Duration: time.Minute}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		runDone := make(chan struct{})
		go func() {
			defer close(runDone)
			_, _ = c.Run(ctx)
		}()
		h := func(id string, i int) hello {
			return hello{ID: id, Index: i, Histogram: hdr.Default, Fingerprint: hdr.Default.Fingerprint(), Incarnation: 1}
		}
		alive, err := c.join(ctx, h("alive", 0))
		if err != nil {
			t.Fatal(err)
		}
		silent, err := c.join(ctx, h("silent", 1))
		if err != nil {
			t.Fatal(err)
		}
		shares := make(chan int, 16)
		// The agents' sides: answer assignments with ready; the live one
		// also heartbeats every second.
		serve := func(cn *conn, beat bool) {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case m := <-cn.out:
					if a, ok := m.(assignment); ok {
						if cn == alive {
							shares <- a.Concurrency
						}
						_ = c.submit(ctx, msgEvent{conn: cn, msg: ready{Epoch: a.Epoch}})
					}
				case <-tick.C:
					if beat {
						_ = c.submit(ctx, msgEvent{conn: cn, msg: heartbeat{}})
					}
				case <-cn.kick:
					return
				case <-ctx.Done():
					return
				}
			}
		}
		go serve(alive, true)
		go serve(silent, false)

		synctest.Wait()
		if got := <-shares; got != 2 {
			t.Fatalf("initial share %d, want 2 of 4", got)
		}
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		select {
		case <-silent.kick:
			t.Fatal("silent agent lost before the heartbeat timeout")
		default:
		}
		time.Sleep(1 * time.Second)
		synctest.Wait()
		select {
		case <-silent.kick:
		default:
			t.Fatal("silent agent not lost 3.5s after its last message")
		}
		if got := <-shares; got != 4 {
			t.Fatalf("survivor's share after the loss %d, want the whole level 4", got)
		}
		cancel()
		<-runDone
	})
}
