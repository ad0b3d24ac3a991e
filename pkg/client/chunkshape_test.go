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

// FuzzEventPlainToken checks the run's handling of chunks a then b with
// the shape path (where the usual token's text is used where it lies,
// matchToken and plainToken) against the same chunks decoded afresh each
// time: the answer, the reasoning, the finish reason, the content chunks
// and the errors must be the same.
func FuzzEventPlainToken(f *testing.F) {
	tok := func(content string) []byte {
		return []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + content + `},"logprobs":null,"finish_reason":null}]}`)
	}
	for _, b := range []string{`"b"`, `""`, `" naïve 😀"`, `"\n"`, `"a\"b"`, "\"\xff\"", `null`, `"\u00e9"`, `"tab	"`} {
		f.Add(tok(`"a"`), tok(b))
	}
	f.Add([]byte(`{"choices":[{"delta":{"reasoning_content":"a"}}]}`), []byte(`{"choices":[{"delta":{"reasoning_content":"b c"}}]}`))
	f.Add([]byte(`{"choices":[{"text":"a","finish_reason":"stop"}]}`), []byte(`{"choices":[{"text":"bb","finish_reason":"stop"}]}`))
	f.Add([]byte(`{"choices":[{"delta":{"reasoning":"a"},"finish_reason":null}]}`), []byte(`{"choices":[{"delta":{"reasoning":""},"finish_reason":null}]}`))
	c := mustNew(f, newConfig("http://127.0.0.1:1"))
	type outcome struct {
		Text, Reasoning, Finish string
		Finished                bool
		Chunks                  int
		Errs                    []string
	}
	handle := func(fresh bool, events ...[]byte) outcome {
		st := &streamState{}
		r := &run{c: c, res: &Result{}}
		var o outcome
		for _, data := range events {
			if fresh {
				st.chunk.shape.ok = false // decode every chunk afresh
			}
			_, err := r.event(st, sse.Event{Data: data}, time.Now())
			o.Errs = append(o.Errs, fmt.Sprint(err))
		}
		o.Text, o.Reasoning, o.Finish, o.Finished, o.Chunks = r.text.String(), r.reasoning.String(), r.res.FinishReason, r.finished, r.chunks
		return o
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if got, want := handle(false, a, b, b), handle(true, a, b, b); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks %q then %q twice:\nshape path %+v\nafresh     %+v", a, b, got, want)
		}
	})
}
