package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

var errClientGone = errors.New("client went away")

// firstToken does the bookkeeping of a request's first token.
func (s *Sim) firstToken(sq *seq, t *ticket, start time.Time) {
	s.router.prefillDone(t)
	s.m.feTTFT.WithLabelValues(s.cfg.Model).Observe(time.Since(start).Seconds())
	s.m.feCached.WithLabelValues(s.cfg.Model).Observe(float64(sq.cached))
	if s.onFirstToken != nil {
		s.onFirstToken(t.worker, sq.simTTFT)
	}
}

func (s *Sim) usage(sq *seq, n int) *openai.Usage {
	return &openai.Usage{
		PromptTokens:        len(sq.prompt),
		CompletionTokens:    n,
		TotalTokens:         len(sq.prompt) + n,
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: sq.cached},
	}
}

func (s *Sim) unary(w http.ResponseWriter, req *request, sq *seq, gone *atomic.Bool, t *ticket, start time.Time) error {
	first := false
	for {
		<-sq.notify
		if gone.Load() {
			return errClientGone
		}
		done := sq.done.Load()
		if !first && sq.progress.Load() > 0 {
			first = true
			s.firstToken(sq, t, start)
		}
		if done {
			break
		}
	}
	n := int(sq.progress.Load())
	if sq.err != nil || n < len(sq.out.ids) {
		msg := "request aborted"
		if sq.err != nil {
			msg = sq.err.Error()
		}
		writeAPIError(w, &apiError{status: http.StatusInternalServerError, typ: typeInternal, msg: msg})
		return errors.New(msg)
	}
	s.m.feOutput.WithLabelValues(s.cfg.Model).Add(float64(n))
	c := openai.Completion{
		ID:      s.newID(req.chat),
		Created: time.Now().Unix(),
		Model:   s.cfg.Model,
		Usage:   s.usage(sq, n),
	}
	text := sq.out.piece(0, n)
	if req.chat {
		c.Object = openai.ObjectChatCompletion
		c.Choices = []openai.Choice{{Message: &openai.Message{Role: openai.RoleAssistant, Content: text}, FinishReason: sq.out.finish}}
	} else {
		c.Object = openai.ObjectTextCompletion
		c.Choices = []openai.Choice{{Text: text, FinishReason: sq.out.finish}}
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Sim) newID(chat bool) string {
	p := "cmpl-"
	if chat {
		p = "chatcmpl-"
	}
	return p + strconv.FormatInt(s.created, 36) + strconv.FormatUint(s.reqID.Add(1), 36)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// stream writes the SSE response. The handler sleeps on the sequence's
// notify channel and, each time it wakes, writes every token produced since
// its last write in one Write and one Flush. Like vLLM V1's output
// collector, tokens that piled up while the client was slow are merged
// into one chunk.
func (s *Sim) stream(w http.ResponseWriter, req *request, sq *seq, gone *atomic.Bool, t *ticket, start time.Time) error {
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	id := s.newID(req.chat)
	created := time.Now().Unix()
	model, _ := json.Marshal(s.cfg.Model)
	var head []byte
	if req.chat {
		head = fmt.Appendf(nil, `data: {"id":"%s","object":"%s","created":%d,"model":%s,"choices":[`, id, openai.ObjectChatCompletionChunk, created, model)
	} else {
		head = fmt.Appendf(nil, `data: {"id":"%s","object":"%s","created":%d,"model":%s,"choices":[`, id, openai.ObjectTextCompletion, created, model)
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	// Looked up once: a label lookup per event was 2-3% of the stream's CPU.
	outputTokens := s.m.feOutput.WithLabelValues(s.cfg.Model)
	sent := 0
	for {
		<-sq.notify
		if gone.Load() {
			return errClientGone
		}
		done := sq.done.Load()
		n := int(sq.progress.Load())
		buf := (*bp)[:0]
		if n > sent {
			if sent == 0 {
				s.firstToken(sq, t, start)
				if req.chat {
					buf = append(buf, head...)
					buf = append(buf, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
				}
			}
			buf = append(buf, head...)
			if req.chat {
				buf = append(buf, `{"index":0,"delta":{"content":`...)
				buf = appendJSONString(buf, sq.out.piece(sent, n))
				buf = append(buf, '}')
			} else {
				buf = append(buf, `{"index":0,"text":`...)
				buf = appendJSONString(buf, sq.out.piece(sent, n))
			}
			buf = append(buf, `,"logprobs":null,"finish_reason":`...)
			if n == len(sq.out.ids) {
				buf = append(buf, '"')
				buf = append(buf, sq.out.finish...)
				buf = append(buf, '"')
			} else {
				buf = append(buf, "null"...)
			}
			buf = append(buf, "}]}\n\n"...)
			outputTokens.Add(float64(n - sent))
			sent = n
		}
		var err error
		if done {
			if sq.err != nil || sent < len(sq.out.ids) {
				msg := "request aborted"
				if sq.err != nil {
					msg = sq.err.Error()
				}
				err = errors.New(msg)
				ae := apiError{status: http.StatusInternalServerError, typ: typeInternal, msg: msg}
				b, _ := json.Marshal(ae.body())
				buf = append(buf, "data: "...)
				buf = append(buf, b...)
				buf = append(buf, "\n\n"...)
			} else if req.includeUsage {
				c := openai.Chunk{ID: id, Created: created, Model: s.cfg.Model, Choices: []openai.ChunkChoice{}, Usage: s.usage(sq, sent)}
				c.Object = openai.ObjectTextCompletion
				if req.chat {
					c.Object = openai.ObjectChatCompletionChunk
				}
				b, _ := json.Marshal(c)
				buf = append(buf, "data: "...)
				buf = append(buf, b...)
				buf = append(buf, "\n\n"...)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		*bp = buf
		if len(buf) > 0 {
			if _, werr := w.Write(buf); werr != nil {
				return errClientGone
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if done {
			return err
		}
	}
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
