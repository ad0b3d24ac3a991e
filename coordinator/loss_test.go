package coordinator

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
					if _, ok := m.(welcome); ok {
						_ = c.submit(ctx, msgEvent{conn: cn, msg: ready{}}) // checked
					}
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

// TestAgentLostAtOnce: an agent reported lost by the caller (its pod
// failed) is lost at once, long before its heartbeat timeout, and counted.
func TestAgentLostAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		c, err := New(Config{
			Agents: 2, HeartbeatInterval: time.Second, HeartbeatTimeout: time.Minute,
			Stages: []Stage{{Level: 4, Duration: time.Hour}},
		}, nil, WithRegisterer(reg))
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
		var cns []*conn
		for i, id := range []string{"pod-0", "pod-1"} {
			cn, err := c.join(ctx, h(id, i))
			if err != nil {
				t.Fatal(err)
			}
			cns = append(cns, cn)
			go func() {
				for {
					select {
					case m := <-cn.out:
						if _, ok := m.(welcome); ok {
							_ = c.submit(ctx, msgEvent{conn: cn, msg: ready{}}) // checked
						}
						if a, ok := m.(assignment); ok {
							_ = c.submit(ctx, msgEvent{conn: cn, msg: ready{Epoch: a.Epoch}})
						}
					case <-cn.kick:
						return
					case <-ctx.Done():
						return
					}
				}
			}()
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := testutil.ToFloat64(c.metrics.agents); got != 2 {
			t.Fatalf("agents connected %v, want 2", got)
		}
		if err := c.AgentLost(ctx, "pod-1", "agent pod pod-1 (index 1): killed for running out of memory"); err != nil {
			t.Fatal(err)
		}
		if err := c.AgentLost(ctx, "never-joined", "failed"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		select {
		case <-cns[1].kick:
		default:
			t.Fatal("agent reported lost still connected")
		}
		if got := testutil.ToFloat64(c.metrics.agentsLost); got != 1 {
			t.Errorf("agents lost %v, want 1 (an unknown id is ignored)", got)
		}
		if got := testutil.ToFloat64(c.metrics.agents); got != 1 {
			t.Errorf("agents connected %v, want 1", got)
		}
		cancel()
		<-runDone
		if err := c.AgentLost(t.Context(), "pod-0", "late"); !errors.Is(err, ErrRunOver) {
			t.Errorf("AgentLost after the run = %v, want ErrRunOver", err)
		}
	})
}
