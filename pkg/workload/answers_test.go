package workload

import (
	"context"
	"testing"
)

func TestDocChatAnswerLengths(t *testing.T) {
	cases := []struct {
		name           string
		answers        AnswerLength
		limit          int
		meanLo, meanHi float64
	}{
		// The published answers averaged about 830 tokens under 1,024.
		{"published under 1024", AnswerLength{}, 1024, 800, 860},
		{"published uncapped", AnswerLength{}, 0, 860, 920},
		{"natural sends the cap", AnswerLength{Natural: true}, 1024, 1024, 1024},
		{"short answers", AnswerLength{Median: 100, Sigma: 0.5}, 1024, 100, 125},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDocChat(t, DocChatConfig{Seed: 3, Documents: 2, MaxTokens: tc.limit, Answers: tc.answers})
			sum, n, distinct := 0, 0, map[int]bool{}
			for i := range 400 {
				c := d.Conversation(i)
				for k := range c.Turns() {
					turn, err := c.Next(context.Background(), k, nil)
					if err != nil {
						t.Fatal(err)
					}
					if tc.limit > 0 && turn.MaxTokens > tc.limit || turn.MaxTokens < MinAnswerTokens {
						t.Fatalf("turn max tokens %d outside [%d, %d]", turn.MaxTokens, MinAnswerTokens, tc.limit)
					}
					again, _ := d.Conversation(i).Next(context.Background(), k, nil)
					if again.MaxTokens != turn.MaxTokens {
						t.Fatalf("conversation %d turn %d: %d then %d tokens", i, k, turn.MaxTokens, again.MaxTokens)
					}
					sum += turn.MaxTokens
					n++
					distinct[turn.MaxTokens] = true
				}
			}
			mean := float64(sum) / float64(n)
			if mean < tc.meanLo || mean > tc.meanHi {
				t.Errorf("mean answer %.0f tokens, want %.0f..%.0f", mean, tc.meanLo, tc.meanHi)
			}
			if !tc.answers.Natural && len(distinct) < 50 {
				t.Errorf("%d distinct lengths: want a distribution, not a constant", len(distinct))
			}
		})
	}
}
