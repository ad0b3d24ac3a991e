package sim

import (
	"math"
	"math/rand/v2"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// The tokenizer is deliberately cheap and context free: a token is a run of
// up to maxWordBytes letters, digits or non-ASCII bytes, or a single ASCII
// punctuation byte; whitespace separates tokens and is not one. Because it
// is context free, tokenize(a + " " + b) == tokenize(a) + tokenize(b), which
// is what makes the next turn of a conversation, which resends the
// simulator's own reply inside a longer prompt, hit the blocks that reply
// left in the cache.
const maxWordBytes = 12

// Special token ids of the chat template. Word ids have the top bit set so
// they never collide with these.
const (
	tokBOS uint32 = iota + 1
	tokStart
	tokEnd
	tokSystem
	tokUser
	tokAssistant
)

func isWordByte(b byte) bool {
	return b >= 0x80 || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\n' || b == '\t' || b == '\r' || b == '\f' || b == '\v'
}

// tokenID is FNV-1a over the token's bytes with the top bit set.
func tokenID(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h | 1<<31
}

// tokenize appends the token ids of s to dst.
func tokenize(dst []uint32, s string) []uint32 {
	for i := 0; i < len(s); {
		b := s[i]
		switch {
		case isSpace(b):
			i++
		case isWordByte(b):
			j := i + 1
			for j < len(s) && j-i < maxWordBytes && isWordByte(s[j]) {
				j++
			}
			dst = append(dst, tokenID(s[i:j]))
			i = j
		default:
			dst = append(dst, tokenID(s[i:i+1]))
			i++
		}
	}
	return dst
}

func roleToken(role string) uint32 {
	switch role {
	case openai.RoleSystem:
		return tokSystem
	case openai.RoleUser:
		return tokUser
	case openai.RoleAssistant:
		return tokAssistant
	}
	return tokenID(role)
}

// chatTokens renders messages with a fixed chat template, as token ids:
// BOS, then per message START role content END, then START assistant (the
// generation prompt). An assistant message in the history therefore renders
// exactly as the prompt that produced it followed by its reply tokens.
func chatTokens(msgs []openai.Message) []uint32 {
	n := 3
	for _, m := range msgs {
		n += 3 + len(m.Content)/4
	}
	ids := make([]uint32, 0, n)
	ids = append(ids, tokBOS)
	for _, m := range msgs {
		ids = append(ids, tokStart, roleToken(m.Role))
		ids = tokenize(ids, m.Content)
		ids = append(ids, tokEnd)
	}
	return append(ids, tokStart, tokAssistant)
}

// completionTokens renders a raw completion prompt.
func completionTokens(prompt string) []uint32 {
	return tokenize(append(make([]uint32, 0, 1+len(prompt)/4), tokBOS), prompt)
}

// Block hashes are chained as in vLLM and TensorRT-LLM: a block's hash
// covers its parent's hash and its own token ids, so equal hashes mean equal
// whole prefixes.
const rootHash uint64 = 0x6a09e667f3bcc908

func hashBlock(parent uint64, ids []uint32) uint64 {
	h := parent
	for _, id := range ids {
		h ^= uint64(id)
		h *= 0x100000001b3
		h ^= h >> 29
	}
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return h
}

// blockHashes returns the chained hashes of the full blocks of ids.
func blockHashes(ids []uint32, bs int) []uint64 {
	n := len(ids) / bs
	hs := make([]uint64, n, n+8)
	parent := rootHash
	for i := range n {
		parent = hashBlock(parent, ids[i*bs:(i+1)*bs])
		hs[i] = parent
	}
	return hs
}

// seqHash summarizes a whole prompt for seeding its reply.
func seqHash(ids []uint32) uint64 {
	return hashBlock(rootHash, ids)
}

var vocabulary = [...]string{
	"the", "model", "cache", "token", "request", "answer", "document", "section",
	"page", "table", "value", "result", "shows", "that", "this", "which",
	"is", "are", "was", "be", "can", "will", "should", "may",
	"of", "in", "on", "for", "with", "from", "by", "to",
	"and", "or", "but", "also", "more", "less", "most", "each",
	"first", "second", "third", "next", "last", "other", "same", "new",
	"report", "figure", "chapter", "summary", "detail", "point", "case", "time",
	"data", "system", "user", "question", "context", "part", "line", "term",
	"cost", "rate", "level", "growth", "risk", "policy", "process", "change",
	"increase", "decrease", "describes", "explains", "compares", "lists", "notes", "suggests",
	"important", "relevant", "specific", "general", "overall", "clear", "likely", "recent",
	"section", "appendix", "revenue", "customer", "market", "product", "service", "quarter",
	"2024", "2025", "10", "25", "percent", "million", "about", "roughly",
	"it", "they", "we", "you", "as", "at", "an", "a",
}

// completion is the deterministic reply to one prompt: token ids, the text
// pieces of those tokens (piece i is text[off[i]:off[i+1]]), and whether it
// ended by EOS (stop) rather than by its length limit.
type completion struct {
	ids    []uint32
	text   string
	off    []int32
	finish string
}

// piece returns the text of tokens [from, to).
func (c *completion) piece(from, to int) string {
	return c.text[c.off[from]:c.off[to]]
}

// lengthParams are the request fields that decide a reply's length.
type lengthParams struct {
	maxTokens int // cap from the request or the context; >= 1
	capped    bool
	minTokens int
	ignoreEOS bool
}

// generate builds the reply to prompt ids for a seed. leadingSpace puts a
// space before the first word (raw completions continue the prompt; chat
// content starts clean). It is a pure function of its arguments.
func generate(ids []uint32, seed int64, out OutputConfig, p lengthParams, leadingSpace bool) *completion {
	h := seqHash(ids)
	rng := rand.New(rand.NewPCG(h, uint64(seed)^0x9e3779b97f4a7c15))
	natural := naturalLength(rng, out)
	n, finish := natural, openai.FinishStop
	if p.ignoreEOS || (out.UntilMaxTokens && p.capped) || n > p.maxTokens {
		n, finish = p.maxTokens, openai.FinishLength
	}
	if n < p.minTokens {
		n, finish = min(p.minTokens, p.maxTokens), openai.FinishStop
		if n == p.maxTokens {
			finish = openai.FinishLength
		}
	}
	c := &completion{ids: make([]uint32, 0, n), off: make([]int32, 0, n+1), finish: finish}
	buf := make([]byte, 0, n*6)
	sentence := 0
	for i := range n {
		c.off = append(c.off, int32(len(buf)))
		var w string
		switch {
		case sentence >= 6 && rng.IntN(10) == 0:
			w, sentence = ".", 0
		case sentence >= 3 && rng.IntN(14) == 0:
			w = ","
		default:
			w = vocabulary[rng.IntN(len(vocabulary))]
			if i > 0 || leadingSpace {
				buf = append(buf, ' ')
			}
			sentence++
		}
		buf = append(buf, w...)
		c.ids = append(c.ids, tokenID(w))
	}
	c.off = append(c.off, int32(len(buf)))
	c.text = string(buf)
	return c
}

// naturalLength draws a log-normal length with the configured mean.
func naturalLength(rng *rand.Rand, out OutputConfig) int {
	mu := math.Log(float64(out.Mean)) - out.Sigma*out.Sigma/2
	n := int(math.Round(math.Exp(mu + out.Sigma*rng.NormFloat64())))
	return max(out.Min, min(out.Max, n))
}
