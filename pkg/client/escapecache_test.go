package client

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestEscapeCache checks that cached escapes equal escaping afresh, on the
// miss and on the hit, and that strings sharing a slot never get each
// other's escape.
func TestEscapeCache(t *testing.T) {
	long := func(mid string) string {
		// Same length, first, middle and last words: the same slot.
		return strings.Repeat("a", 600) + mid + strings.Repeat("b", 600)
	}
	tests := []struct {
		name string
		in   []string
	}{
		{"short, not cached", []string{"hi \"there\"", "hi \"there\""}},
		{"plain", []string{long("plain.."), long("plain..")}},
		{"escaped", []string{long("q\"\n\\\x01\xff"), long("q\"\n\\\x01\xff")}},
		{"same slot, other text", []string{long("first.."), long("second."), long("first.."), long("\"\"\"\"\"\"\"")}},
		{"equal text, other memory", []string{long("copy..."), strings.Clone(long("copy..."))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c escapeCache
			for i, s := range tt.in {
				want := appendEscaped([]byte("prefix"), s)
				if got := c.appendEscaped([]byte("prefix"), s); !bytes.Equal(got, want) {
					t.Fatalf("call %d: cached escape of %.40q... differs from escaping afresh", i, s)
				}
			}
		})
	}
}

// TestEscapeCacheConcurrent escapes the same and colliding strings from many
// goroutines (run with -race).
func TestEscapeCacheConcurrent(t *testing.T) {
	var c escapeCache
	strs := []string{strings.Repeat("x", 2000), strings.Repeat("x", 999) + "\"" + strings.Repeat("x", 1000), strings.Repeat("y\n", 1500)}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				s := strs[(g+i)%len(strs)]
				if got, want := c.appendEscaped(nil, s), appendEscaped(nil, s); !bytes.Equal(got, want) {
					t.Errorf("goroutine %d: cached escape differs", g)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkBuildLongHistory builds a chat body with a 12 KB system prompt and
// a few turns, as the load benchmarks send, with and without the cache.
func BenchmarkBuildLongHistory(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 12<<10; i++ {
		sb.WriteString("Paragraph of the reference document describes the system in some detail. ")
	}
	req := &Request{Messages: userRequest(sb.String()).Messages}
	tmpl, err := newBodyTemplate(Config{Model: "m", Endpoint: EndpointChat})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cached", func(b *testing.B) {
		buf := make([]byte, 0, 16<<10)
		for b.Loop() {
			buf = tmpl.build(buf[:0], req)
		}
	})
	b.Run("uncached", func(b *testing.B) {
		buf := make([]byte, 0, 16<<10)
		for b.Loop() {
			buf = append(buf[:0], `"content":"`...)
			buf = appendEscaped(buf, req.Messages[0].Content)
		}
	})
}

// FuzzEscapeCache checks the cache against escaping afresh on long strings
// built from the input, through a miss, a hit and a colliding neighbour.
func FuzzEscapeCache(f *testing.F) {
	for _, s := range []string{"plain", "q\"\\\n", "\xff\xe2\x82", "\u2028x"} {
		f.Add(s, uint16(700))
	}
	var c escapeCache
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		if s == "" {
			return
		}
		long := strings.Repeat(s, int(n)%4096/len(s)+1)
		other := []byte(long)
		other[len(other)/3] ^= 1 // same length and sampled words, mostly: a likely collision
		for i, in := range []string{long, long, string(other), long} {
			if got, want := c.appendEscaped(nil, in), appendEscaped(nil, in); !bytes.Equal(got, want) {
				t.Fatalf("call %d: cached escape differs from escaping afresh", i)
			}
		}
	})
}
