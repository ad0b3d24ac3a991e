package workload

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// loadCodec builds the cl100k_base codec once. Building it fills a
// 100k-entry vocabulary map (tens of milliseconds), so every caller shares one
// instance. The codec is safe for concurrent Count, Encode and Decode: the
// vocabulary is read-only after construction, the split regexp hands each
// match its own runner, and the reverse vocabulary is built under a sync.Once.
var loadCodec = sync.OnceValues(func() (tokenizer.Codec, error) {
	c, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		return nil, fmt.Errorf("load cl100k_base tokenizer: %w", err)
	}
	// Decoding a prefix of a token sequence can end inside a multi-byte
	// character; replacing keeps every string we build valid UTF-8.
	c.SetErrorMode(tokenizer.ErrorModeReplace)
	return c, nil
})

// codec returns the shared tokenizer. The vocabulary is embedded in the
// binary, so failure means a broken build; it panics rather than making every
// Count call return an error nobody could act on.
func codec() tokenizer.Codec {
	c, err := loadCodec()
	if err != nil {
		panic(err)
	}
	return c
}

// Count returns the number of cl100k_base tokens in text. cl100k_base is
// close to Llama 3's tokenizer for English prose (within a few percent), so
// counts here approximate what an OpenAI-compatible server reports as prompt
// tokens, less its chat template. Safe for concurrent use.
func Count(text string) int {
	if text == "" {
		return 0
	}
	n, err := codec().Count(text)
	if err != nil {
		// Only the regexp engine's timeout can fail here, and none is set.
		return utf8.RuneCountInString(text) / 4
	}
	return n
}

// Truncate returns text cut to at most n cl100k_base tokens, at a token
// boundary. When the cut falls inside a multi-byte character, the partial
// character is dropped. Safe for concurrent use.
func Truncate(text string, n int) string {
	if n <= 0 {
		return ""
	}
	c := codec()
	ids, _, err := c.Encode(text)
	if err != nil || len(ids) <= n {
		return text
	}
	out, err := c.Decode(ids[:n])
	if err != nil {
		return text
	}
	return strings.TrimSuffix(out, string(utf8.RuneError))
}

// Build returns text of about n cl100k_base tokens made by concatenating the
// pieces next yields, in order, and cutting the result at a token boundary.
// It asks for pieces until the text holds n tokens, so next must keep
// yielding non-empty strings. Re-encoding the result may differ from n by a
// token where the cut merges differently; callers that need exactness check
// with Count. Safe for concurrent use when next is.
func Build(n int, next func() string) string {
	if n <= 0 {
		return ""
	}
	var sb strings.Builder
	// Tokenizing is the costly part, so grow the text by a character
	// estimate (English prose runs about four characters per token) and
	// encode only when the estimate says it may be long enough.
	want := n * 5
	for {
		for sb.Len() < want {
			p := next()
			if p == "" {
				return Truncate(sb.String(), n)
			}
			sb.WriteString(p)
		}
		have := Count(sb.String())
		if have >= n {
			return Truncate(sb.String(), n)
		}
		want = sb.Len() + (n-have)*5 + 16
	}
}
