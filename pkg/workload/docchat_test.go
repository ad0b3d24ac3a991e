package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
)

// userTurns plays conversation i of s with template-made assistant replies
// and returns its user messages.
func userTurns(t testing.TB, s Source, i int) []string {
	t.Helper()
	c := s.Conversation(i)
	history := []openai.Message{{Role: openai.RoleSystem, Content: c.System()}}
	var out []string
	for k := range c.Turns() {
		turn, err := c.Next(context.Background(), k, history)
		if err != nil {
			t.Fatalf("conversation %d turn %d: %v", i, k, err)
		}
		out = append(out, turn.User)
		history = append(history,
			openai.Message{Role: openai.RoleUser, Content: turn.User},
			openai.Message{Role: openai.RoleAssistant, Content: fmt.Sprintf("reply %d", k)})
	}
	return out
}

func newDocChat(t testing.TB, cfg DocChatConfig) *DocChat {
	t.Helper()
	d, err := NewDocChat(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDocChatDeterministic(t *testing.T) {
	a := newDocChat(t, DocChatConfig{Seed: 7})
	b := newDocChat(t, DocChatConfig{Seed: 7})
	c := newDocChat(t, DocChatConfig{Seed: 8})
	differs := 0
	for i := range 50 {
		ua, ub, uc := userTurns(t, a, i), userTurns(t, b, i), userTurns(t, c, i)
		if strings.Join(ua, "\x00") != strings.Join(ub, "\x00") {
			t.Fatalf("conversation %d differs between two sources with the same seed", i)
		}
		if strings.Join(ua, "\x00") != strings.Join(uc, "\x00") {
			differs++
		}
	}
	if differs < 45 {
		t.Errorf("only %d of 50 conversations differ between seeds 7 and 8", differs)
	}
	// Order of calls must not matter: conversation 30 asked first.
	d := newDocChat(t, DocChatConfig{Seed: 7})
	if strings.Join(userTurns(t, d, 30), "\x00") != strings.Join(userTurns(t, a, 30), "\x00") {
		t.Error("conversation 30 depends on call order")
	}
}

func TestDocChatConcurrent(t *testing.T) {
	d := newDocChat(t, DocChatConfig{Seed: 3, Think: ThinkTime{Kind: ThinkExp, Mean: time.Second}})
	want := make([]string, 40)
	for i := range want {
		want[i] = strings.Join(userTurns(t, d, i), "\x00")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range want {
				j := (i + g*5) % len(want)
				if got := strings.Join(userTurns(t, d, j), "\x00"); got != want[j] {
					t.Errorf("conversation %d differs under concurrency", j)
				}
			}
		})
	}
	wg.Wait()
}

func TestDocChatPromptTokens(t *testing.T) {
	for _, target := range []int{1000, 3100, 8000} {
		for _, seed := range []int64{1, 2, 99} {
			t.Run(fmt.Sprintf("%d/seed%d", target, seed), func(t *testing.T) {
				d := newDocChat(t, DocChatConfig{Seed: seed, PromptTokens: target})
				lo, hi := math.MaxInt, 0
				for i := range 60 {
					c := d.Conversation(i)
					turn, err := c.Next(context.Background(), 0, nil)
					if err != nil {
						t.Fatal(err)
					}
					n := Count(c.System()) + Count(turn.User)
					lo, hi = min(lo, n), max(hi, n)
				}
				tol := float64(target) * 0.02
				if float64(lo) < float64(target)-tol || float64(hi) > float64(target)+tol {
					t.Errorf("prompt tokens in [%d, %d], want %d ±2%%", lo, hi, target)
				}
				t.Logf("prompt tokens in [%d, %d] for target %d", lo, hi, target)
			})
		}
	}
}

func TestDocChatDocuments(t *testing.T) {
	d := newDocChat(t, DocChatConfig{Seed: 5, Documents: 12})
	if len(d.docs) != 12 {
		t.Fatalf("%d documents", len(d.docs))
	}
	// Documents differ from the title's first word, right after the shared
	// <document> tag.
	seen := map[string]bool{}
	for _, doc := range d.docs {
		body := strings.TrimPrefix(doc.prefix, docOpen)
		first := Truncate(body, 4)
		if seen[first] {
			t.Errorf("two documents start with %q", first)
		}
		seen[first] = true
		if len(doc.sections) < 3 {
			t.Errorf("%q has sections %q", doc.title, doc.sections)
		}
	}
	// Conversations spread over all documents and share each document's
	// prefix byte for byte.
	used := map[*document]int{}
	for i := range 600 {
		c := d.Conversation(i).(*docConv)
		used[c.doc]++
		turn, _ := c.Next(context.Background(), 0, nil)
		if !strings.HasPrefix(turn.User, c.doc.prefix) {
			t.Fatal("first turn does not start with the document")
		}
	}
	for _, doc := range d.docs {
		if used[doc] < 25 {
			t.Errorf("document %q used by %d of 600 conversations", doc.title, used[doc])
		}
	}
}

func TestDocChatTurnCounts(t *testing.T) {
	d := newDocChat(t, DocChatConfig{Seed: 11, MinTurns: 2, MaxTurns: 6})
	const n = 10000
	counts := map[int]int{}
	for i := range n {
		counts[d.Conversation(i).Turns()]++
	}
	for k, c := range counts {
		if k < 2 || k > 6 {
			t.Errorf("%d conversations have %d turns", c, k)
		}
	}
	// Uniform over 5 values: chi-square with 4 degrees of freedom; 18.47
	// is the 0.999 quantile.
	chi := 0.0
	for k := 2; k <= 6; k++ {
		e := float64(n) / 5
		chi += (float64(counts[k]) - e) * (float64(counts[k]) - e) / e
	}
	if chi > 18.47 {
		t.Errorf("turn counts %v are not uniform (chi2 = %.1f)", counts, chi)
	}
}

func TestDocChatFollowUpsDoNotRepeat(t *testing.T) {
	d := newDocChat(t, DocChatConfig{Seed: 4, MinTurns: 20, MaxTurns: 20})
	for i := range 20 {
		c := d.Conversation(i).(*docConv)
		seen := map[int]bool{}
		for k := 1; k < c.Turns(); k++ {
			idx := (c.start + (k-1)*c.stride) % len(followUps)
			if seen[idx] {
				t.Fatalf("conversation %d repeats template %d at turn %d", i, idx, k)
			}
			seen[idx] = true
		}
	}
}

func TestDocChatThinkAndMaxTokens(t *testing.T) {
	d := newDocChat(t, DocChatConfig{Seed: 1, MaxTokens: 77, Think: ThinkTime{Kind: ThinkFixed, Mean: time.Second}})
	c := d.Conversation(0)
	for k := range c.Turns() {
		turn, _ := c.Next(context.Background(), k, nil)
		want := time.Second
		if k == 0 {
			want = 0
		}
		if turn.ThinkTime != want || turn.MaxTokens != 77 {
			t.Errorf("turn %d: think %v max %d", k, turn.ThinkTime, turn.MaxTokens)
		}
	}
	if _, err := c.Next(context.Background(), c.Turns(), nil); !errors.Is(err, ErrTurnRange) {
		t.Errorf("out-of-range turn: %v", err)
	}
}

func TestDocChatConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  DocChatConfig
	}{
		{"small prompt", DocChatConfig{PromptTokens: 100}},
		{"turns inverted", DocChatConfig{MinTurns: 5, MaxTurns: 2}},
		{"negative documents", DocChatConfig{Documents: -1}},
		{"negative max tokens", DocChatConfig{MaxTokens: -1}},
		{"user model without url", DocChatConfig{UserModel: &UserModelConfig{Model: "m"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewDocChat(tt.cfg, nil, nil); err == nil {
				t.Error("accepted")
			}
		})
	}
	if _, err := NewDocChat(DocChatConfig{UserModel: &UserModelConfig{URL: "http://x"}}, nil, nil); err == nil {
		t.Error("user model without asker accepted")
	}
}

func TestDocChatDir(t *testing.T) {
	dir := t.TempDir()
	long := "# Field Notes\n\n## Soil\n" + strings.Repeat("The loam held water well after the spring rains. ", 600)
	files := map[string]string{
		"a.md":      long,
		"b.txt":     "A short memo about the office move.",
		"c.json":    `{"ignored": true}`,
		"d.txt":     "   ",
		"e.md":      "# Lone Title\nbody text",
		"notes.bin": "x",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := newDocChat(t, DocChatConfig{Seed: 1, Dir: dir})
	if len(d.docs) != 3 {
		t.Fatalf("%d documents, want 3 (a.md, b.txt, e.md)", len(d.docs))
	}
	if d.docs[0].title != "Field Notes" || d.docs[0].sections[0] != "Soil" {
		t.Errorf("a.md: title %q sections %q", d.docs[0].title, d.docs[0].sections)
	}
	if d.docs[1].title != "b" {
		t.Errorf("b.txt title %q", d.docs[1].title)
	}
	// The long file is cut to the prompt budget.
	n := Count(docSystemPrompt) + Count(d.docs[0].prefix)
	if n > DefaultPromptTokens || n < DefaultPromptTokens-60 {
		t.Errorf("long file prefix has %d tokens", n)
	}
	capped := newDocChat(t, DocChatConfig{Seed: 1, Dir: dir, Documents: 1})
	if len(capped.docs) != 1 {
		t.Errorf("Documents: 1 kept %d", len(capped.docs))
	}
	if _, err := NewDocChat(DocChatConfig{Dir: t.TempDir()}, nil, nil); err == nil {
		t.Error("empty dir accepted")
	}
}

// fakeAsker is a test Asker built from a function.
type fakeAsker struct {
	stream func(ctx context.Context, req *client.Request) *client.Result
	mu     sync.Mutex
	reqs   []*client.Request
}

func (f *fakeAsker) Stream(ctx context.Context, req *client.Request) *client.Result {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return f.stream(ctx, req)
}

func TestDocChatUserModel(t *testing.T) {
	um := &UserModelConfig{URL: "http://user-model", Model: "m"}
	calls := 0
	var mu sync.Mutex
	asker := &fakeAsker{stream: func(ctx context.Context, req *client.Request) *client.Result {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls % 4 {
		case 0:
			return &client.Result{Class: client.ClassHTTP5xx, Status: 503, Err: errors.New("overloaded")}
		case 1:
			return &client.Result{Text: "  \n"}
		default:
			return &client.Result{Text: "User: \"What about the rollout plan?\"\n\nExtra commentary."}
		}
	}}
	d, err := NewDocChat(DocChatConfig{Seed: 2, MinTurns: 4, MaxTurns: 4, UserModel: um}, nil, asker)
	if err != nil {
		t.Fatal(err)
	}
	fallbacks, fromModel := 0, 0
	for i := range 5 {
		c := d.Conversation(i)
		history := []openai.Message{{Role: openai.RoleSystem, Content: c.System()}}
		for k := range c.Turns() {
			turn, err := c.Next(context.Background(), k, history)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case turn.Fallback:
				fallbacks++
			case k > 0:
				fromModel++
				if turn.User != "What about the rollout plan?" {
					t.Errorf("question not cleaned: %q", turn.User)
				}
			}
			history = append(history,
				openai.Message{Role: openai.RoleUser, Content: turn.User},
				openai.Message{Role: openai.RoleAssistant, Content: "An answer."})
		}
	}
	// 15 follow-ups: calls 1..15, calls%4 in {0,1} fail: 1,4,5,8,9,12,13.
	if fallbacks != 7 || fromModel != 8 || d.Fallbacks() != 7 {
		t.Errorf("fallbacks %d (source says %d), from model %d; want 7 and 8", fallbacks, d.Fallbacks(), fromModel)
	}
	// The user model sees the thread with the document replaced by its
	// title, and gets the configured token cap.
	req := asker.reqs[0]
	if req.MaxTokens != DefaultUserModelMaxTokens || len(req.Messages) != 2 {
		t.Fatalf("request: max tokens %d, %d messages", req.MaxTokens, len(req.Messages))
	}
	prompt := req.Messages[1].Content
	if strings.Contains(prompt, "<document>") || !strings.Contains(prompt, "[shares the document") || !strings.Contains(prompt, "An answer.") {
		t.Errorf("user model prompt:\n%s", prompt)
	}
}

func TestDocChatUserModelContext(t *testing.T) {
	um := &UserModelConfig{URL: "http://user-model", Timeout: 20 * time.Millisecond}
	asker := &fakeAsker{stream: func(ctx context.Context, req *client.Request) *client.Result {
		<-ctx.Done()
		return &client.Result{Class: client.ClassTimeout, Err: ctx.Err()}
	}}
	d, err := NewDocChat(DocChatConfig{Seed: 2, MinTurns: 2, MaxTurns: 2, UserModel: um}, nil, asker)
	if err != nil {
		t.Fatal(err)
	}
	// The user model's own timeout is a fallback, not an error.
	turn, err := d.Conversation(0).Next(context.Background(), 1, nil)
	if err != nil || !turn.Fallback || turn.User == "" {
		t.Fatalf("timeout: %+v, %v", turn, err)
	}
	// The caller's cancellation is an error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Conversation(0).Next(ctx, 1, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	d.cfg.UserModel.Timeout = time.Minute
	if _, err := d.Conversation(0).Next(ctx, 1, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller deadline: %v", err)
	}
}

func TestCleanQuestion(t *testing.T) {
	tests := map[string]string{
		"  What next?  ":                 "What next?",
		"\"Quoted?\"":                    "Quoted?",
		"User: Labelled?":                "Labelled?",
		"\u201cCurly?\u201d":             "Curly?",
		"First line?\n\nSecond thought.": "First line?",
		"\"":                             "\"",
		"":                               "",
	}
	for in, want := range tests {
		if got := cleanQuestion(in); got != want {
			t.Errorf("cleanQuestion(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkDocChatConversation(b *testing.B) {
	d := newDocChat(b, DocChatConfig{Seed: 1})
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := d.Conversation(i)
		for k := range c.Turns() {
			if _, err := c.Next(ctx, k, nil); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
}

func BenchmarkNewDocChat(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		newDocChat(b, DocChatConfig{Seed: 1})
	}
}
