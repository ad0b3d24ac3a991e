package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
)

// Asker sends one chat request to the user model. *client.Client satisfies
// it. Implementations must be safe for concurrent use.
type Asker interface {
	Stream(ctx context.Context, req *client.Request) *client.Result
}

// AskerFunc adapts a function to Asker.
type AskerFunc func(ctx context.Context, req *client.Request) *client.Result

// Stream calls f.
func (f AskerFunc) Stream(ctx context.Context, req *client.Request) *client.Result {
	return f(ctx, req)
}

var _ Asker = AskerFunc(nil)

// User-model defaults.
const (
	DefaultUserModelMaxTokens = 96
	DefaultUserModelTimeout   = 30 * time.Second
)

// UserModelConfig names a second OpenAI-compatible endpoint that writes the
// simulated user's follow-up questions. The command that builds the source
// makes a client from ClientConfig and passes it to New as the Asker.
type UserModelConfig struct {
	// URL is the endpoint's base URL, e.g. http://host:8000/v1.
	URL string `json:"url"`
	// Model is the model name sent in requests.
	Model string `json:"model"`
	// APIKeyEnv names the environment variable holding the API key ("" for
	// none). The key itself never appears in configuration or logs.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// MaxTokens caps the question's length (default 96).
	MaxTokens int `json:"-"`
	// Timeout bounds one question; on timeout the turn falls back to a
	// template (default 30s).
	Timeout time.Duration `json:"-"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c UserModelConfig) WithDefaults() UserModelConfig {
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultUserModelMaxTokens
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultUserModelTimeout
	}
	return c
}

// Validate reports settings that cannot work.
func (c UserModelConfig) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("user model: URL is empty")
	case c.MaxTokens < 0:
		return errors.New("user model: max tokens is negative")
	case c.Timeout < 0:
		return errors.New("user model: timeout is negative")
	}
	return nil
}

// ClientConfig returns the client configuration for the user model's
// endpoint. Timeout is also applied per question by the source, so the
// client's RequestTimeout is a backstop.
func (c UserModelConfig) ClientConfig() client.Config {
	c = c.WithDefaults()
	return client.Config{
		BaseURL:        c.URL,
		Model:          c.Model,
		APIKeyEnv:      c.APIKeyEnv,
		MaxTokens:      c.MaxTokens,
		RequestTimeout: c.Timeout,
	}
}

// ErrEmptyQuestion is the fallback reason when the user model answers with
// nothing usable.
var ErrEmptyQuestion = errors.New("user model returned an empty question")

const (
	// transcriptTurns bounds how many earlier messages the user model sees.
	transcriptTurns = 8
	// transcriptChars bounds each message in the transcript.
	transcriptChars = 1500
)

// ask has the user model write the next question given the history (system
// prompt, then alternating user and assistant messages). The document itself
// is replaced by its title: the user model needs the thread, not 3k tokens it
// would have to prefill on every follow-up.
func (d *DocChat) ask(ctx context.Context, doc *document, history []openai.Message) (string, error) {
	um := d.cfg.UserModel
	if um.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, um.Timeout)
		defer cancel()
	}
	req := &client.Request{Messages: userModelMessages(doc, history), MaxTokens: um.MaxTokens}
	res := d.asker.Stream(ctx, req)
	if res == nil {
		return "", errors.New("user model returned no result")
	}
	if !res.OK() {
		if res.Err != nil {
			return "", fmt.Errorf("ask user model (%s): %w", res.Class, res.Err)
		}
		return "", fmt.Errorf("ask user model: %s", res.Class)
	}
	q := cleanQuestion(res.Text)
	if q == "" {
		return "", ErrEmptyQuestion
	}
	return q, nil
}

// userModelMessages builds the user model's prompt: instructions in the
// system message, the conversation as a transcript in one user message.
func userModelMessages(doc *document, history []openai.Message) []openai.Message {
	var sb strings.Builder
	fmt.Fprintf(&sb, "You are role-playing a person who is reading the document %q and chatting with an AI assistant about it. ", doc.title)
	sb.WriteString("Given the conversation so far, write the person's next message to the assistant: one natural follow-up question or request, ")
	sb.WriteString("at most two sentences, in the first person. Reply with the message only, without quotes, labels or preamble.")
	system := sb.String()

	sb.Reset()
	sb.WriteString("The document's sections: ")
	sb.WriteString(strings.Join(doc.sections, "; "))
	sb.WriteString("\n\nConversation so far:\n")
	msgs := history
	if len(msgs) > 0 && msgs[0].Role == openai.RoleSystem {
		msgs = msgs[1:]
	}
	if len(msgs) > transcriptTurns {
		msgs = msgs[len(msgs)-transcriptTurns:]
		sb.WriteString("[earlier messages omitted]\n")
	}
	for _, m := range msgs {
		text := m.Content
		if m.Role == openai.RoleUser {
			if rest, ok := strings.CutPrefix(text, doc.prefix); ok {
				text = fmt.Sprintf("[shares the document %q] %s", doc.title, rest)
			}
		}
		label := "User"
		if m.Role == openai.RoleAssistant {
			label = "Assistant"
		}
		fmt.Fprintf(&sb, "\n%s: %s\n", label, clip(strings.TrimSpace(text), transcriptChars))
	}
	sb.WriteString("\nWrite the user's next message.")
	return []openai.Message{
		{Role: openai.RoleSystem, Content: system},
		{Role: openai.RoleUser, Content: sb.String()},
	}
}

// clip cuts s to at most n bytes at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " [...]"
}

// cleanQuestion strips what chat models wrap answers in: whitespace, a
// "User:" label, surrounding quotes, and anything after a blank line.
func cleanQuestion(s string) string {
	s = strings.TrimSpace(s)
	for _, label := range []string{"User:", "user:", "Question:", "Next message:"} {
		s = strings.TrimSpace(strings.TrimPrefix(s, label))
	}
	if i := strings.Index(s, "\n\n"); i > 0 {
		s = s[:i]
	}
	if len(s) >= 2 {
		for _, q := range []string{`"`, "'", "\u201c"} {
			closing := q
			if q == "\u201c" {
				closing = "\u201d"
			}
			if strings.HasPrefix(s, q) && strings.HasSuffix(s, closing) && len(s) > len(q)+len(closing) {
				s = strings.TrimSpace(s[len(q) : len(s)-len(closing)])
				break
			}
		}
	}
	return s
}
