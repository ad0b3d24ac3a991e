package sim

import (
	"os"
	"sync"
	"testing"
	"time"
)

// TestKVStickinessCrossover shows the crossover real deployments report at
// high concurrency: below the fleet's batch capacity KV routing has the
// lower p95 TTFT, and once bursts push a worker past its batch limit KV
// routing's p95 rises above round robin's. The kv router's cost (Dynamo's:
// blocks to prefill + active blocks) does not see a full batch: a queued
// follow-up whose history is cached there adds only its few new blocks, so
// turns keep going to the full worker while others have free slots. Round
// robin spreads requests evenly, so its workers pass the limit less often
// (4-7x less of the time in these runs) and queue fewer turns when they do.
//
// Settings: the calibrated profile with MaxBatch 16 instead of 64, so the
// crossover comes at 4 x 16 = 64 sessions rather than ~256 (which the
// published sweep does not reach: at 120 sessions its replicas hold ~30
// requests each, far from 64), document chats on 10 shared ~3,000-token
// documents, answers of 200 tokens instead of ~830 to keep the test short
// (~7 s at time scale 20). Below the capacity, at 32 sessions, kv's p95 is
// ~20-40% under round robin's; at 64 it is 1.5-10x above it. TTFTs are the
// engines' simulated ones; the arrivals, though, follow the wall clock, so
// a host busy with other tests bunches them (round robin's p95 then passed
// a second in one run of the race-detected suite), and even alone kv's p95
// at 32 sessions once came out at 316 ms. It is not stable enough to gate
// `make test`: it runs only with FLEETBENCH_CROSSOVER=1 (docs/simulator.md,
// Known gaps). The routers' requests in flight per worker are sampled to
// show the bursts.
func TestKVStickinessCrossover(t *testing.T) {
	if os.Getenv("FLEETBENCH_CROSSOVER") != "1" {
		t.Skip("not stable yet: set FLEETBENCH_CROSSOVER=1 to run it (docs/simulator.md, Known gaps)")
	}
	const batch = 16
	wl := newDocChat(10, 3000)
	wl.maxTokens = 200
	type outcome struct {
		p50, p95 time.Duration
		peak     int // most requests in flight on one worker
		over     int // samples x workers past the batch limit
		hit      float64
	}
	at := func(users int) map[Mode]outcome {
		modes := []Mode{ModeKV, ModeRoundRobin}
		clocks := make([]*simTTFTs, len(modes))
		sims := make([]*Sim, len(modes))
		hits := make([]float64, len(modes))
		for i, m := range modes {
			clocks[i] = &simTTFTs{}
			sims[i] = startRecordingSim(t, clocks[i], func(c *Config) {
				c.Router, c.TimeScale, c.Engine.MaxBatch = m, 20, batch
			})
		}
		// Sample the routers' requests in flight per worker for the
		// peaks; 1 ms of wall time is 20 ms simulated, under one step.
		peaks, over := make([]int, len(modes)), make([]int, len(modes))
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				for i, s := range sims {
					for _, v := range s.router.load() {
						peaks[i] = max(peaks[i], v)
						if v > batch {
							over[i]++
						}
					}
				}
			}
		})
		var wg sync.WaitGroup
		for i := range modes {
			wg.Go(func() {
				wl.run(t, sims[i], users, 0, users)
				clocks[i].record(true)
				hits[i] = wl.run(t, sims[i], users, users, 2*users).hitRate()
				clocks[i].record(false)
			})
		}
		wg.Wait()
		close(stop)
		sampler.Wait()
		out := make(map[Mode]outcome, len(modes))
		for i, m := range modes {
			d := clocks[i].get()
			o := outcome{p50: percentile(d, 50), p95: percentile(d, 95), peak: peaks[i], over: over[i], hit: hits[i]}
			out[m] = o
			t.Logf("%3d sessions %-12s hit rate %.3f, simulated TTFT p50 %v p95 %v; in flight on a worker: peak %d, past the batch of %d for %d worker-samples",
				users, m, o.hit, o.p50.Round(time.Millisecond), o.p95.Round(time.Millisecond), o.peak, batch, o.over)
		}
		return out
	}
	below := at(2 * batch)
	if kv, rr := below[ModeKV], below[ModeRoundRobin]; kv.p95 >= rr.p95 {
		t.Errorf("%d sessions: kv p95 %v, round robin %v: want kv lower below the fleet's batch capacity", 2*batch, kv.p95, rr.p95)
	}
	full := at(4 * batch)
	kv, rr := full[ModeKV], full[ModeRoundRobin]
	if kv.p95 <= rr.p95 {
		t.Errorf("%d sessions: kv p95 %v, round robin %v: want kv higher once bursts pass the batch limit", 4*batch, kv.p95, rr.p95)
	}
	if kv.peak <= batch || kv.over <= rr.over {
		t.Errorf("%d sessions: kv's workers held up to %d requests and passed the batch of %d for %d worker-samples, round robin's %d: want kv's bursts past the limit, and more often",
			4*batch, kv.peak, batch, kv.over, rr.over)
	}
	// The crossover is in the tail: kv still has the lower median, from
	// its cache hits.
	if kv.p50 >= rr.p50 {
		t.Errorf("%d sessions: kv p50 %v, round robin %v: want kv lower", 4*batch, kv.p50, rr.p50)
	}
}
