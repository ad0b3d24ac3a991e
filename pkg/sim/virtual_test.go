package sim

import (
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// TestVirtualRequestPath: on sim.Virtual a lone request's TTFT is exactly
// the frontend's delay plus one prefill step, and the same prompt again is
// served from the cache (its last block recomputed) on the worker the kv
// router picks from the indexer's view, which learns the blocks only after
// the event delay.
func TestVirtualRequestPath(t *testing.T) {
	cfg, err := ProfileConfig(DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVirtual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []openai.Message{{Role: openai.RoleUser, Content: words(7, 2000)}}
	var first, second VirtualReply
	send := func(into *VirtualReply) {
		t.Helper()
		if err := v.Send(msgs, 50, nil, func(r VirtualReply) { *into = r }); err != nil {
			t.Fatal(err)
		}
	}
	send(&first)
	v.RunUntil(time.Minute)
	e := cfg.Engine
	n := first.PromptTokens
	want := cfg.Frontend.Delay(n) + e.StepBase + time.Duration(n)*e.PrefillPerToken
	t.Logf("%d-token prompt alone: TTFT %v (want %v), E2E %v, %d tokens", n, first.TTFT, want, first.E2E, first.Tokens)
	if first.Err != nil || first.TTFT != want || first.CachedTokens != 0 || first.Tokens != 50 {
		t.Fatalf("first request: %+v, want TTFT %v, nothing cached, 50 tokens", first, want)
	}
	send(&second)
	v.RunUntil(2 * time.Minute)
	bs := e.BlockSize
	cached := (n - 1) / bs * bs
	want = cfg.Frontend.Delay(n) + e.StepBase + time.Duration(n-cached)*e.PrefillPerToken
	t.Logf("again: worker %d (first on %d), %d cached, TTFT %v (want %v)", second.Worker, first.Worker, second.CachedTokens, second.TTFT, want)
	if second.Worker != first.Worker || second.CachedTokens != cached || second.TTFT != want {
		t.Errorf("second request: worker %d, %d cached, TTFT %v; want worker %d, %d cached, TTFT %v",
			second.Worker, second.CachedTokens, second.TTFT, first.Worker, cached, want)
	}
}
