package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// docChat is a document-chat workload built for these tests: a few shared
// starter documents, multi-turn conversations that resend their history
// with the simulator's real replies.
type docChat struct {
	docs      []string
	convs     int
	minTurns  int
	maxTurns  int
	maxTokens int
}

func newDocChat(docs, docTokens, convs int) *docChat {
	d := &docChat{convs: convs, minTurns: 3, maxTurns: 5, maxTokens: 400}
	for i := range docs {
		d.docs = append(d.docs, words(1000+i, docTokens))
	}
	return d
}

// runStats are what a run measured on the client side.
type runStats struct {
	prompt, cached int
	ttft           []time.Duration
	failed         int
}

func (r *runStats) hitRate() float64 { return float64(r.cached) / float64(max(1, r.prompt)) }

// run plays all conversations with the given number of concurrent users.
func (d *docChat) run(t testing.TB, s *Sim, users int) *runStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := testClient()
	var mu sync.Mutex
	st := &runStats{}
	next := make(chan int)
	var wg sync.WaitGroup
	for range users {
		wg.Go(func() {
			for i := range next {
				msgs := []openai.Message{{Role: openai.RoleSystem, Content: "You answer questions about the document."}}
				turns := d.minTurns + i%(d.maxTurns-d.minTurns+1)
				for k := range turns {
					q := fmt.Sprintf("Question %d of conversation %d: %s?", k, i, words(i*10+k, 20))
					if k == 0 {
						q = "Document:\n" + d.docs[i%len(d.docs)] + "\n\n" + q
					}
					msgs = append(msgs, openai.Message{Role: openai.RoleUser, Content: q})
					r, err := post(ctx, c, s.URL(), "/v1/chat/completions", chatBody(msgs, d.maxTokens))
					mu.Lock()
					if err != nil || r.status != 200 || r.usage == nil {
						st.failed++
						mu.Unlock()
						break
					}
					st.prompt += r.usage.PromptTokens
					st.cached += r.usage.PromptTokensDetails.CachedTokens
					st.ttft = append(st.ttft, r.ttft)
					mu.Unlock()
					msgs = append(msgs, openai.Message{Role: openai.RoleAssistant, Content: r.content})
				}
			}
		})
	}
	for i := range d.convs {
		next <- i
	}
	close(next)
	wg.Wait()
	if st.failed > 0 {
		t.Errorf("%d conversations failed", st.failed)
	}
	return st
}

// scale keeps the realism tests short; the race detector slows the client
// and server alike, so it gets a lighter load.
func realismLoad() (convs, users int) {
	if raceEnabled {
		return 40, 8
	}
	return 80, 24
}

func TestRealismKVBeatsRoundRobin(t *testing.T) {
	convs, users := realismLoad()
	wl := newDocChat(10, 3000, convs)
	// Both modes run at the same time on two simulators, so CPU contention
	// on a shared test machine (late timers) hits them alike.
	modes := []Mode{ModeKV, ModeRoundRobin}
	results := make([]*runStats, len(modes))
	sims := make([]*Sim, len(modes))
	befores := make([][2]float64, len(modes))
	took := make([]time.Duration, len(modes))
	for i, mode := range modes {
		sims[i] = startSim(t, func(c *Config) {
			c.Router = mode
			c.TimeScale = 20
			c.Output = OutputConfig{Mean: 250, Sigma: 0.5, Min: 50, Max: 600}
		})
	}
	var wg sync.WaitGroup
	for i := range modes {
		wg.Go(func() {
			s := sims[i]
			// Warm-up: every document once, as a fleet that has been
			// serving a while would have seen them; not measured.
			warm := newDocChat(10, 3000, 10)
			warm.minTurns, warm.maxTurns = 1, 1
			warm.run(t, s, 1)
			befores[i] = prefixCounters(s)
			start := time.Now()
			results[i] = wl.run(t, s, users)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, mode := range modes {
		s, st := sims[i], results[i]
		t.Logf("%-12s hit rate %.3f  TTFT p50 %v p95 %v (wall; x%g = simulated)  requests %d  took %v",
			mode, st.hitRate(), percentile(st.ttft, 50), percentile(st.ttft, 95), s.cfg.TimeScale, len(st.ttft), took[i].Round(time.Millisecond))
		// The workers' own counters agree with what clients saw.
		after := prefixCounters(s)
		hits, queries := after[0]-befores[i][0], after[1]-befores[i][1]
		var routed []float64
		for _, w := range s.workers {
			routed = append(routed, testutil.ToFloat64(s.m.routed.WithLabelValues(string(mode), w.name)))
		}
		t.Logf("%-12s requests per worker %v", mode, routed)
		if int(hits) != st.cached || int(queries) != st.prompt {
			t.Errorf("%s: vllm prefix cache counters %v/%v, clients saw %d/%d", mode, hits, queries, st.cached, st.prompt)
		}
	}
	kv, rr := results[0], results[1]
	if kv.hitRate() <= 0.90 {
		t.Errorf("kv hit rate %.3f, want > 0.90", kv.hitRate())
	}
	if rr.hitRate() > kv.hitRate()-0.05 || rr.hitRate() < 0.3 {
		t.Errorf("round robin hit rate %.3f, want clearly below kv's %.3f but not near zero", rr.hitRate(), kv.hitRate())
	}
	for _, p := range []float64{50, 95} {
		if k, r := percentile(kv.ttft, p), percentile(rr.ttft, p); k >= r {
			t.Errorf("TTFT p%v: kv %v, round robin %v; want kv lower", p, k, r)
		}
	}
}

func TestRealismQueueingNearSaturation(t *testing.T) {
	// One replica with a batch of 8: below it requests run at once, above
	// it they queue and TTFT climbs.
	s := startSim(t, func(c *Config) {
		c.Replicas = 1
		c.TimeScale = 20
		c.Engine.MaxBatch = 8
	})
	c := testClient()
	ttftAt := func(users int) time.Duration {
		var mu sync.Mutex
		var ttft []time.Duration
		var wg sync.WaitGroup
		for u := range users {
			wg.Go(func() {
				for k := range 4 {
					b := openai.CompletionRequest{Prompt: words(users*1000+u*10+k, 800), MaxTokens: ptr(60), IgnoreEOS: ptr(true), Stream: true}
					r, err := post(context.Background(), c, s.URL(), "/v1/completions", b)
					if err != nil || r.status != 200 {
						t.Errorf("request: %v %+v", err, r)
						return
					}
					mu.Lock()
					ttft = append(ttft, r.ttft)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return percentile(ttft, 50)
	}
	levels := []int{1, 4, 8, 16, 24}
	var p50 []time.Duration
	for _, u := range levels {
		p50 = append(p50, ttftAt(u))
	}
	t.Logf("TTFT p50 by concurrency %v: %v", levels, p50)
	if !(p50[1] >= p50[0] && p50[2] > p50[0] && p50[3] > 2*p50[2] && p50[4] > p50[3]) {
		t.Errorf("TTFT p50 does not climb with queueing: %v at %v users", p50, levels)
	}
}

func TestRealismEvictionsWithSmallCache(t *testing.T) {
	convs, users := 30, 8
	wl := newDocChat(10, 2000, convs)
	wl.maxTokens = 100
	hit := map[int]float64{}
	for _, blocks := range []int{12500, 700} {
		s := startSim(t, func(c *Config) {
			c.Replicas = 1
			c.TimeScale = 20
			c.Engine.NumBlocks = blocks
			c.Output = OutputConfig{Mean: 80, Sigma: 0.3, Min: 20, Max: 100}
		})
		st := wl.run(t, s, users)
		hit[blocks] = st.hitRate()
		ev := testutil.ToFloat64(s.workers[0].m.evictions)
		text, err := scrape(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%5d blocks: hit rate %.3f, evicted blocks %v", blocks, st.hitRate(), ev)
		if has := strings.Contains(text, "fleetbench_sim_kv_cache_evicted_blocks_total{"); !has {
			t.Error("/metrics lacks the evictions counter")
		}
		if blocks == 700 && ev == 0 {
			t.Error("small cache: no evictions")
		}
		if blocks == 12500 && ev != 0 {
			t.Errorf("big cache: %v evictions", ev)
		}
	}
	if hit[700] >= hit[12500]-0.1 {
		t.Errorf("hit rate with small cache %.3f, big %.3f: want a clear drop", hit[700], hit[12500])
	}
}

func scrape(s *Sim) (string, error) {
	resp, err := testClient().Get(s.URL() + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, err = fmt.Fprint(&sb, mustRead(resp))
	return sb.String(), err
}

// prefixCounters sums vllm:prefix_cache_hits_total and _queries_total.
func prefixCounters(s *Sim) [2]float64 {
	var v [2]float64
	for _, w := range s.workers {
		v[0] += testutil.ToFloat64(w.m.prefixHits)
		v[1] += testutil.ToFloat64(w.m.prefixQueries)
	}
	return v
}
