package client

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// bodyTemplate builds request bodies. The fields that are the same for every
// request are encoded once, in New; a request adds only max_tokens and its
// messages or prompt. It is immutable after New and safe for concurrent use.
type bodyTemplate struct {
	chat         bool
	prefix       []byte // `{"model":...` and every fixed field, no closing brace
	maxTokens    int
	setMaxTokens bool // false when ExtraBody supplies max_tokens
}

// newBodyTemplate encodes the fixed part of the body. Fields named in
// ExtraBody are left out and ExtraBody's value is sent instead.
func newBodyTemplate(cfg Config) (*bodyTemplate, error) {
	extra, err := parseExtraBody(cfg.ExtraBody)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	field := func(key string, value []byte) {
		if _, ok := extra[key]; ok {
			return
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(key)) // keys are fixed ASCII names
		b.WriteByte(':')
		b.Write(value)
	}
	model, err := json.Marshal(cfg.Model)
	if err != nil {
		return nil, err
	}
	field("model", model)
	field("stream", []byte("true"))
	field("stream_options", []byte(`{"include_usage":true}`))
	if cfg.MinTokens != nil {
		field("min_tokens", strconv.AppendInt(nil, int64(*cfg.MinTokens), 10))
	}
	if cfg.IgnoreEOS {
		field("ignore_eos", []byte("true"))
	}
	if cfg.Temperature != nil {
		t, err := json.Marshal(*cfg.Temperature)
		if err != nil {
			return nil, err
		}
		field("temperature", t)
	}
	if cfg.Seed != nil {
		field("seed", strconv.AppendInt(nil, *cfg.Seed, 10))
	}
	// Sorted so the body is the same on every run.
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		var v bytes.Buffer
		if err := json.Compact(&v, extra[k]); err != nil {
			return nil, err
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(key)
		b.WriteByte(':')
		b.Write(v.Bytes())
	}
	_, extraMax := extra["max_tokens"]
	return &bodyTemplate{
		chat:         cfg.Endpoint == EndpointChat,
		prefix:       b.Bytes(),
		maxTokens:    cfg.MaxTokens,
		setMaxTokens: !extraMax,
	}, nil
}

// build returns the JSON body for req. The chat endpoint sends req.Messages,
// or req.Prompt as one user message when Messages is empty; the completions
// endpoint sends req.Prompt, or the messages' contents joined by blank lines
// when Prompt is empty.
func (t *bodyTemplate) build(req *Request) ([]byte, error) {
	size := len(t.prefix) + len(req.Prompt) + 64
	for _, m := range req.Messages {
		size += len(m.Content) + len(m.Role) + 32
	}
	b := bytes.NewBuffer(make([]byte, 0, size))
	b.Write(t.prefix)
	if t.setMaxTokens {
		n := t.maxTokens
		if req.MaxTokens > 0 {
			n = req.MaxTokens
		}
		if n > 0 {
			b.WriteString(`,"max_tokens":`)
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(n), 10))
		}
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if t.chat {
		msgs := req.Messages
		if len(msgs) == 0 {
			msgs = []openai.Message{{Role: openai.RoleUser, Content: req.Prompt}}
		}
		b.WriteString(`,"messages":`)
		if err := enc.Encode(msgs); err != nil {
			return nil, err
		}
	} else {
		prompt := req.Prompt
		if prompt == "" && len(req.Messages) > 0 {
			parts := make([]string, len(req.Messages))
			for i, m := range req.Messages {
				parts[i] = m.Content
			}
			prompt = strings.Join(parts, "\n\n")
		}
		b.WriteString(`,"prompt":`)
		if err := enc.Encode(prompt); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
