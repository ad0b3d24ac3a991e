package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Answer lengths of document chats: the answers of the published Dynamo
// sweep of Llama 3.1 70B on 3-5-turn document chats averaged about 830
// tokens under a max_tokens of 1,024 (a representative conversation gave
// 555, 818, 1,008, 875 and 888). A log-normal with median 850 and shape
// 0.3, capped at 1,024, has that mean and spread (docs/simulator.md).
const (
	DefaultAnswerMedian = 850
	DefaultAnswerSigma  = 0.3
	// MinAnswerTokens is the shortest answer drawn.
	MinAnswerTokens = 16
)

// AnswerLength is how long document-chat answers are. By default each turn
// draws its length and sends it as the turn's max_tokens, capped by the
// run's max_tokens: a server that generates up to max_tokens (vLLM or
// TensorRT-LLM with ignore_eos, fleetbench's simulator by default) then
// answers at the published lengths. Natural leaves the length to the model:
// every turn sends only the cap. The zero value is the published
// distribution.
type AnswerLength struct {
	// Median is the median answer in tokens; 0 means DefaultAnswerMedian.
	Median int
	// Sigma is the log-normal shape; 0 means DefaultAnswerSigma.
	Sigma float64
	// Natural sends no per-turn length: the model stops on its own.
	Natural bool
}

// WithDefaults returns a with zero fields set to their defaults.
func (a AnswerLength) WithDefaults() AnswerLength {
	if a.Median == 0 {
		a.Median = DefaultAnswerMedian
	}
	if a.Sigma == 0 {
		a.Sigma = DefaultAnswerSigma
	}
	return a
}

// Validate reports settings that cannot work.
func (a AnswerLength) Validate() error {
	if a.Median < MinAnswerTokens || a.Sigma < 0 || a.Sigma > 3 || math.IsNaN(a.Sigma) {
		return fmt.Errorf("answer length: want median >= %d and 0 <= sigma <= 3, got %d and %v", MinAnswerTokens, a.Median, a.Sigma)
	}
	return nil
}

// tokens returns one turn's max_tokens: the drawn length capped at limit
// (0: no cap), or limit itself for natural stops.
func (a AnswerLength) tokens(r *rand.Rand, limit int) int {
	if a.Natural {
		return limit
	}
	n := int(math.Round(float64(a.Median) * math.Exp(a.Sigma*r.NormFloat64())))
	n = max(MinAnswerTokens, n)
	if limit > 0 {
		n = min(n, limit)
	}
	return n
}
