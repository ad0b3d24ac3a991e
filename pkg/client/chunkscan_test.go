package client

import (
	"reflect"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// chunkSeeds are chunks as vLLM, OpenAI, SGLang and llama.cpp send them,
// and shapes the fast path must leave to encoding/json.
var chunkSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3012,"total_tokens":3044,"completion_tokens":32,"prompt_tokens_details":{"cached_tokens":2992}}}`,
	`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":null}}`,
	`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hello","logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"delta":{"reasoning_content":"Let me think","content":null}}]}`,
	`{"choices":[{"delta":{"reasoning":"hmm"}}],"usage":null}`,
	`{"choices":[{"delta":{"content":"line\nbreak \"quoted\" \\ tab\t caf\u00e9 \ud83d\ude00 \/"}}]}`,
	`{"choices":[{"delta":{"content":"naïve 日本語 😀"}}]}`,
	`{"choices":[{"delta":{"content":"a"},"finish_reason":null},{"delta":{"content":"b"},"finish_reason":"length"}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"x\":1}"}}]}}]}`,
	`{"choices":[{"delta":{"content":"x"},"logprobs":{"content":[{"token":"x","logprob":-0.5e-3,"top_logprobs":[]}]}}]}`,
	` { "choices" : [ { "delta" : { "content" : "spaced" } } ] } `,
	`{"choices":[]}`,
	`{}`,
	// Left to encoding/json.
	`{"error":{"message":"engine died","type":"InternalServerError","code":500}}`,
	`{"object":"error","message":"bad","type":"BadRequestError","code":400}`,
	`{"choices":[{"delta":{"Content":"case"}}]}`,
	`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
	`{"choices":[{"delta":{"content":"\ud800"}}]}`,
	`{"choices":[{"delta":{"content":"` + "\xff" + `"}}]}`,
	`{"usage":{"prompt_tokens":1.0}}`,
	`{"usage":{"prompt_tokens":99999999999}}`,
	`{"choices":null}`,
	`{"choices":[null]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choices":[]} x`,
	`{"choices":[]}]`,
	`{"choices":[`,
	`[]`,
	`{"con\u0074ent":1}`,
}

// FuzzChunkFastPath checks the chunk fast path against encoding/json:
// whatever parseFast accepts, encoding/json must decode without error to
// the same chunk, starting from a chunk reused after another decode, as in
// a stream.
func FuzzChunkFastPath(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow wireChunk
		var dec chunkDecoder
		dirty := []byte(`{"object":"x","message":"m","type":"t","choices":[{"delta":{"content":"c","reasoning":"r"},"text":"t","finish_reason":"f"},{"text":"u"}],"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4}},"error":"e","code":7}`)
		for _, c := range []*wireChunk{&fast, &slow} {
			if err := dec.decode(dirty, c); err != nil {
				t.Fatal(err)
			}
			c.reset()
		}
		if !fast.parseFast(data) {
			return
		}
		if err := dec.decode(data, &slow); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json rejects it: %v", data, err)
		}
		if got, want := normalize(&fast), normalize(&slow); !reflect.DeepEqual(got, want) {
			t.Fatalf("decode %q:\nfast path    %+v\nencoding/json %+v", data, got, want)
		}
	})
}

// decodedChunk is a wireChunk with what Stream cannot tell apart made
// equal: a nil and an empty Choices.
type decodedChunk struct {
	Object, Message, Type, Error, Code string
	Choices                            []wireChoice
	Usage                              *openai.Usage
}

func normalize(c *wireChunk) decodedChunk {
	d := decodedChunk{Object: string(c.Object), Message: c.Message, Type: c.Type, Error: string(c.Error), Code: string(c.Code), Usage: c.Usage}
	if len(c.Choices) > 0 {
		d.Choices = c.Choices
	}
	return d
}

// TestChunkFastPathTakesCommonChunks checks that the chunks servers send on
// every token do take the fast path, and that error chunks do not.
func TestChunkFastPathTakesCommonChunks(t *testing.T) {
	for i, s := range chunkSeeds {
		var c wireChunk
		got := c.parseFast([]byte(s))
		want := i < 16 // the seeds before "Left to encoding/json"
		if got != want {
			t.Errorf("parseFast(%s) = %t, want %t", s, got, want)
		}
	}
}

// BenchmarkChunkDecode compares the fast path with encoding/json on a
// content chunk.
func BenchmarkChunkDecode(b *testing.B) {
	data := []byte(chunkSeeds[1])
	b.Run("fast", func(b *testing.B) {
		var c wireChunk
		b.ReportAllocs()
		for b.Loop() {
			c.reset()
			if !c.parseFast(data) {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		var c wireChunk
		var dec chunkDecoder
		b.ReportAllocs()
		for b.Loop() {
			c.reset()
			if err := dec.decode(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
