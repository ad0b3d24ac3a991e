package workload

import (
	"strings"
	"sync"
	"testing"
)

func TestCount(t *testing.T) {
	tests := []struct {
		name string
		text string
		want int
	}{
		{"empty", "", 0},
		// Reference counts from OpenAI's cl100k_base.
		{"hello world", "hello world", 2},
		{"sentence", "The quick brown fox jumps over the lazy dog.", 10},
		{"tiktoken", "tiktoken is great!", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Count(tt.text); got != tt.want {
				t.Errorf("Count(%q) = %d, want %d", tt.text, got, tt.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	text := "The quick brown fox jumps over the lazy dog."
	if got := Truncate(text, 3); got != "The quick brown" {
		t.Errorf("Truncate(3) = %q", got)
	}
	if got := Truncate(text, 100); got != text {
		t.Errorf("Truncate(100) = %q, want whole text", got)
	}
	if got := Truncate(text, 0); got != "" {
		t.Errorf("Truncate(0) = %q, want empty", got)
	}
	// A cut inside a multi-byte character must not leave invalid UTF-8 or
	// a replacement character behind.
	emoji := strings.Repeat("\U0001F680", 20)
	for n := 1; n < Count(emoji); n++ {
		got := Truncate(emoji, n)
		if strings.ContainsRune(got, '\uFFFD') || !strings.HasPrefix(emoji, got) {
			t.Fatalf("Truncate(emoji, %d) = %q, not a clean prefix", n, got)
		}
	}
}

func TestBuild(t *testing.T) {
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa")
	for _, n := range []int{1, 10, 257, 3000} {
		i := 0
		got := Build(n, func() string { i++; return words[i%len(words)] + " " })
		if c := Count(got); c < n-1 || c > n {
			t.Errorf("Build(%d) has %d tokens", n, c)
		}
	}
}

func TestCountConcurrent(t *testing.T) {
	const text = "Concurrent callers share one tokenizer instance."
	want := Count(text)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if got := Count(text); got != want {
					t.Errorf("Count = %d, want %d", got, want)
					return
				}
				_ = Truncate(text, 3)
			}
		})
	}
	wg.Wait()
}
