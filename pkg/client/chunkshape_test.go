package client

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

// dirtyChunk is a chunk reused after decoding a busy one, as a stream's is.
func dirtyChunk(t *testing.T) *wireChunk {
	t.Helper()
	var c wireChunk
	var dec chunkDecoder
	if err := dec.decode([]byte(`{"object":"x","message":"m","type":"t","choices":[{"delta":{"content":"c","reasoning":"r"},"text":"t","finish_reason":"f"},{"text":"u"}],"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4}},"error":"e"}`), &c); err != nil {
		t.Fatal(err)
	}
	c.reset()
	return &c
}

// match is matchToken with every token decoded into c, as encoding/json
// would decode it: what FuzzChunkShape compares.
func (c *wireChunk) match(data []byte) bool {
	text, ok := c.matchToken(data)
	if text != nil {
		c.setToken(string(text))
	}
	return ok
}

// FuzzChunkShape checks the shape path against encoding/json: after the
// fast path decoded a, whatever b match accepts, encoding/json must decode
// to the same chunk.
func FuzzChunkShape(f *testing.F) {
	for i := range chunkSeeds {
		f.Add([]byte(chunkSeeds[i]), []byte(chunkSeeds[(i+1)%len(chunkSeeds)]))
	}
	tok := func(content string) []byte {
		return []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + content + `},"logprobs":null,"finish_reason":null}]}`)
	}
	for _, b := range []string{`"b"`, `""`, `"a","content":"b"`, `"a"},"x":{"y":"`, `"\u00e9\n\"q\""`, `"\ud800"`, "\"\xff\"", `null`, `"a\"`, `"a" `, `5`} {
		f.Add(tok(`"a"`), tok(b))
	}
	f.Add([]byte(`{"choices":[{"text":"a","finish_reason":null}]}`), []byte(`{"choices":[{"text":"bb","finish_reason":null}]}`))
	f.Add([]byte(`{"choices":[{"delta":{"reasoning_content":"a"}}]}`), []byte(`{"choices":[{"delta":{"reasoning_content":"b\tc"}}]}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fast := dirtyChunk(t)
		if !fast.parseFast(a) || !fast.match(b) {
			return
		}
		slow := dirtyChunk(t)
		var dec chunkDecoder
		if err := dec.decode(b, slow); err != nil {
			t.Fatalf("after %q the shape path accepted %q, encoding/json rejects it: %v", a, b, err)
		}
		if got, want := normalize(fast), normalize(slow); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %q decode %q:\nshape path    %+v\nencoding/json %+v", a, b, got, want)
		}
	})
}

// TestChunkShapeTakesTokenChunks checks that a stream's token chunks take
// the shape path, with each token's text, and that a chunk that changes
// anything else does not.
func TestChunkShapeTakesTokenChunks(t *testing.T) {
	tok := func(content, finish string) string {
		return `{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":` + content + `},"logprobs":null,"finish_reason":` + finish + `}]}`
	}
	stream := []struct {
		data  string
		shape bool // match takes it
		text  string
	}{
		{`{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`, false, ""},
		{tok(`" Hello"`, "null"), false, " Hello"}, // the role is gone: a new shape
		{tok(`" world"`, "null"), true, " world"},
		{tok(`"\"q\"\n"`, "null"), true, "\"q\"\n"},
		{tok(`"naïve 😀"`, "null"), true, "naïve 😀"},
		{tok(`""`, "null"), true, ""},
		{tok(`"x","reasoning":"y"`, "null"), false, "x"}, // two token strings: no shape learned
		{tok(`"z"`, "null"), false, "z"},
		{tok(`"!"`, `"stop"`), false, "!"},
		{`{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`, false, ""},
	}
	c := dirtyChunk(t)
	for i, s := range stream {
		data := []byte(s.data)
		got := c.match(data)
		if got != s.shape {
			t.Errorf("chunk %d: match = %t, want %t", i, got, s.shape)
		}
		if !got {
			c.reset()
			if !c.parseFast(data) {
				t.Fatalf("chunk %d: fast path refused %s", i, data)
			}
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != s.text {
			t.Errorf("chunk %d: content %q, want %q", i, c.Choices[0].Delta.Content, s.text)
		}
		want := dirtyChunk(t)
		var dec chunkDecoder
		if err := dec.decode(data, want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(c), normalize(want)) {
			t.Errorf("chunk %d: %+v, encoding/json %+v", i, normalize(c), normalize(want))
		}
	}
	// A chunk larger than maxShapeBytes is decoded but not kept.
	c.reset()
	if !c.parseFast([]byte(tok(`"`+strings.Repeat("a", maxShapeBytes)+`"`, "null"))) || c.match([]byte(tok(`"b"`, "null"))) {
		t.Error("a chunk over maxShapeBytes was kept as a shape")
	}
}

// FuzzEventPlainToken checks the run's handling of chunks a, b, b and a
// again with the shape path (where the usual token's text is used where it
// lies, matchToken and plainToken), and with the event loops' fast path
// first (fastToken, then the usual way for what it does not take), against
// the same chunks decoded afresh each time: the answer, the reasoning, the
// finish reason, the usage, the content chunks, the ITL count and the
// errors must be the same.
func FuzzEventPlainToken(f *testing.F) {
	tok := func(content string) []byte {
		return []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + content + `},"logprobs":null,"finish_reason":null}]}`)
	}
	for _, b := range []string{`"b"`, `""`, `" naïve 😀"`, `"\n"`, `"a\"b"`, "\"\xff\"", `null`, `"\u00e9"`, `"tab	"`} {
		f.Add(tok(`"a"`), tok(b))
	}
	f.Add([]byte(`{"choices":[{"delta":{"reasoning_content":"a"}}]}`), []byte(`{"choices":[{"delta":{"reasoning_content":"b c"}}]}`))
	f.Add([]byte(`{"choices":[{"text":"a","finish_reason":"stop"}]}`), []byte(`{"choices":[{"text":"bb","finish_reason":"stop"}]}`))
	f.Add([]byte(`{"choices":[{"text":"a","finish_reason":"length"}]}`), []byte(`{"choices":[{"text":"bb","finish_reason":"stop"}]}`))
	f.Add([]byte(`{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`), []byte(`{"choices":[{"delta":{"content":"b"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`))
	f.Add([]byte(`{"choices":[{"delta":{"reasoning":"a"},"finish_reason":null}]}`), []byte(`{"choices":[{"delta":{"reasoning":""},"finish_reason":null}]}`))
	f.Add(tok(`"a"`), append([]byte(" "), tok(`"b"`)...))
	f.Add(tok(`"a"`), append(tok(`"b"`), ' '))
	c := mustNew(f, newConfig("http://127.0.0.1:1"))
	type outcome struct {
		Text, Reasoning, Finish string
		Finished                bool
		Chunks, ITL             int
		Usage                   [4]int
		Errs                    []string
	}
	const (
		shaped = iota // the shape path, as the blocking reads take it
		fresh         // every chunk decoded afresh
		fast          // the event loops' fastToken first
	)
	handle := func(mode int, events ...[]byte) outcome {
		st := &streamState{}
		r := &run{c: c, res: &Result{}}
		r.tok = &r.own
		var fs fastShape
		var o outcome
		for i, data := range events {
			now := time.Unix(0, int64(i+1)*int64(time.Millisecond))
			if mode == fast && r.tok.fastToken(&fs, data, now) {
				o.Errs = append(o.Errs, "<nil>")
				continue
			}
			if mode == fresh {
				st.chunk.shape.ok = false // decode every chunk afresh
			}
			_, err := r.event(st, sse.Event{Data: data}, now)
			o.Errs = append(o.Errs, fmt.Sprint(err))
			if err != nil {
				break // the stream's outcome is decided
			}
			fs.follow(&st.chunk.shape)
		}
		o.Text, o.Reasoning, o.Finish, o.Finished, o.Chunks = r.tok.answer(), r.reasoning.String(), r.res.FinishReason, r.finished, r.tok.chunks
		o.ITL = len(r.tok.itl)
		o.Usage = [4]int{r.res.PromptTokens, r.res.OutputTokens, r.res.CachedTokens, map[bool]int{true: 1}[r.res.UsageReported]}
		return o
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := handle(fresh, a, b, b, a)
		for _, mode := range []int{shaped, fast} {
			if got := handle(mode, a, b, b, a); !reflect.DeepEqual(got, want) {
				t.Fatalf("chunks %q, %q twice, then %q (mode %d):\ngot    %+v\nafresh %+v", a, b, a, mode, got, want)
			}
		}
	})
}

// TestFastToken checks what the event loops' fast path takes after a
// token chunk: a chunk that differs only in its plain token string; not a
// chunk with another byte outside it, an escaped token, a reasoning token
// or the stream's first token.
func TestFastToken(t *testing.T) {
	chunk := func(id, delta string) []byte {
		return []byte(`{"id":"` + id + `","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`)
	}
	c := mustNew(t, newConfig("http://127.0.0.1:1"))
	for _, k := range []struct {
		name       string
		first      []byte
		next       []byte
		firstCount bool // the first chunk was a content token
		want       bool
	}{
		{"same shape", chunk("1", `{"content":"a"}`), chunk("1", `{"content":" bc"}`), true, true},
		{"empty token", chunk("1", `{"content":"a"}`), chunk("1", `{"content":""}`), true, true},
		{"other id", chunk("1", `{"content":"a"}`), chunk("2", `{"content":"b"}`), true, false},
		{"escaped", chunk("1", `{"content":"a"}`), chunk("1", `{"content":"\n"}`), true, false},
		{"two strings", chunk("1", `{"content":"a"}`), chunk("1", `{"content":"a","x":"b"}`), true, false},
		{"reasoning", chunk("1", `{"reasoning_content":"a"}`), chunk("1", `{"reasoning_content":"b"}`), true, false},
		{"first token", chunk("1", `{"content":""}`), chunk("1", `{"content":"b"}`), false, false},
	} {
		t.Run(k.name, func(t *testing.T) {
			st := &streamState{}
			r := &run{c: c, res: &Result{}}
			r.tok = &r.own
			if _, err := r.event(st, sse.Event{Data: k.first}, time.Now()); err != nil {
				t.Fatal(err)
			}
			var fs fastShape
			fs.follow(&st.chunk.shape)
			before := r.tok.chunks
			if got := r.tok.fastToken(&fs, k.next, time.Now()); got != k.want {
				t.Fatalf("fastToken = %t, want %t", got, k.want)
			}
			if (before > 0) != k.firstCount {
				t.Fatalf("first chunk counted %d tokens", before)
			}
		})
	}
}
