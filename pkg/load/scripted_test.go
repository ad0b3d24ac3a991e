package load

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// scripted is an OpenAI-compatible streaming server with a fixed script: the
// first token firstToken after the request arrived, then one token every gap,
// tokens(n) tokens for the n-th request (from 1). Token times are computed
// from the arrival, so the server does not drift. It is safe for concurrent
// use by many connections.
type scripted struct {
	firstToken, gap time.Duration
	tokens          func(n int64) int
	// check, when set, decodes each request and fails it with 400 when check
	// returns an error. Without it the body is discarded unread.
	check func(req *openai.ChatCompletionRequest, r *http.Request) error
	// uniqueReplies makes each reply start with "r<n> " so a test can tell
	// replies apart.
	uniqueReplies bool

	n    atomic.Int64
	late lateness // first token written after its due time
	read lateness // time to read the request body
}

// chunk bytes shared by every stream.
var (
	tokenEvent  = mustEvent(openai.Chunk{Object: openai.ObjectChatCompletionChunk, Choices: []openai.ChunkChoice{{Delta: &openai.Delta{Content: "tok "}}}})
	finishEvent = mustEvent(openai.Chunk{Object: openai.ObjectChatCompletionChunk, Choices: []openai.ChunkChoice{{Delta: &openai.Delta{}, FinishReason: ptr(openai.FinishStop)}}})
	doneEvent   = []byte("data: [DONE]\n\n")
)

func ptr[T any](v T) *T { return &v }

func mustEvent(c openai.Chunk) []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return slices.Concat([]byte("data: "), b, []byte("\n\n"))
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	n := s.n.Add(1)
	if s.check != nil {
		var req openai.ChatCompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.check(&req, r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	s.read.add(time.Since(arrived))
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	k := 10
	if s.tokens != nil {
		k = s.tokens(n)
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for i := range k {
		due := arrived.Add(s.firstToken + time.Duration(i)*s.gap)
		t.Reset(time.Until(due))
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		if i == 0 {
			s.late.add(time.Since(due))
		}
		ev := tokenEvent
		if i == 0 && s.uniqueReplies {
			ev = mustEvent(openai.Chunk{Object: openai.ObjectChatCompletionChunk, Choices: []openai.ChunkChoice{{Delta: &openai.Delta{Content: "r" + strconv.FormatInt(n, 10) + " "}}}})
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	usage := mustEvent(usageChunk(k))
	// No flush: net/http writes the rest with the chunked terminator in one
	// segment when the handler returns, so the client sees the end of the
	// body with [DONE] and keeps the connection.
	_, _ = w.Write(slices.Concat(finishEvent, usage, doneEvent))
}

// usageChunk is the final usage chunk of a reply of k tokens.
func usageChunk(k int) openai.Chunk {
	return openai.Chunk{Object: openai.ObjectChatCompletionChunk, Choices: []openai.ChunkChoice{},
		Usage: &openai.Usage{PromptTokens: 100, CompletionTokens: k, TotalTokens: 100 + k}}
}

// reply is the text the scripted server streams for request n with k tokens.
func (s *scripted) reply(n int64, k int) string {
	var b []byte
	for i := range k {
		if i == 0 && s.uniqueReplies {
			b = fmt.Appendf(b, "r%d ", n)
			continue
		}
		b = append(b, "tok "...)
	}
	return string(b)
}

// lateness is a coarse histogram of how late the server wrote first tokens,
// in 0.1 ms buckets up to 100 ms; safe for concurrent use.
type lateness struct {
	mu      sync.Mutex
	buckets [1001]int64
	n       int64
}

func (l *lateness) add(d time.Duration) {
	i := min(max(int(d/(100*time.Microsecond)), 0), len(l.buckets)-1)
	l.mu.Lock()
	l.buckets[i]++
	l.n++
	l.mu.Unlock()
}

// percentile returns the p-th percentile (0..100), at bucket resolution.
func (l *lateness) percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	want := int64(p / 100 * float64(l.n))
	var seen int64
	for i, c := range l.buckets {
		seen += c
		if seen > want {
			return time.Duration(i+1) * 100 * time.Microsecond
		}
	}
	return 0
}

func (l *lateness) reset() {
	l.mu.Lock()
	l.buckets, l.n = [1001]int64{}, 0
	l.mu.Unlock()
}
