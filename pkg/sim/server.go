package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

const maxBodyBytes = 32 << 20

func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.handleChat)
	mux.HandleFunc("/v1/completions", s.handleCompletion)
	mux.HandleFunc("/v1/models", s.handleModels)
	mux.HandleFunc("/health", s.handleHealth)
	mux.HandleFunc("/health/ready", s.handleReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("/admin/router", s.handleAdminRouter)
	mux.HandleFunc("POST /admin/restart/frontend", s.handleRestartFrontend)
	mux.HandleFunc("POST /admin/restart/workers", s.handleRestartWorkers)
	mux.HandleFunc("GET /admin/state", s.handleState)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, httpError(http.StatusNotFound))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// handleModels lists the model once workers have registered it. While
// workers load, Dynamo's frontend has no model registered and answers with
// an empty list (vLLM itself does not listen until it is ready); the model
// then appears before the workers can serve — the gap the probe command
// measures.
func (s *Sim) handleModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeAPIError(w, httpError(http.StatusMethodNotAllowed))
		return
	}
	list := openai.ModelList{Object: openai.ObjectList, Data: []openai.Model{}}
	if s.phase(time.Now()) != phaseLoading {
		list.Data = append(list.Data, openai.Model{
			ID:          s.cfg.Model,
			Object:      openai.ObjectModel,
			Created:     s.created,
			OwnedBy:     "fleetbench-sim",
			MaxModelLen: s.cfg.Engine.MaxModelLen,
		})
	}
	writeJSON(w, http.StatusOK, list)
}

// handleHealth is liveness: the frontend process answers.
func (s *Sim) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
}

// handleReady is readiness: 200 only when workers can serve.
func (s *Sim) handleReady(w http.ResponseWriter, _ *http.Request) {
	if s.phase(time.Now()) != phaseReady {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "notready"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

type modeBody struct {
	Mode Mode `json:"mode"`
}

func (s *Sim) handleAdminRouter(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, modeBody{Mode: s.Mode()})
	case http.MethodPut, http.MethodPost:
		b, err := io.ReadAll(io.LimitReader(r.Body, 4096))
		if err != nil {
			writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeBadRequest, msg: "read body: " + err.Error()})
			return
		}
		name := strings.TrimSpace(string(b))
		var mb modeBody
		if strings.HasPrefix(name, "{") {
			if err := json.Unmarshal(b, &mb); err != nil {
				writeAPIError(w, decodeError(err))
				return
			}
			name = string(mb.Mode)
		}
		m, err := ParseMode(name)
		if err != nil {
			writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeBadRequest, param: "mode", msg: err.Error()})
			return
		}
		s.SetMode(m)
		writeJSON(w, http.StatusOK, modeBody{Mode: m})
	default:
		writeAPIError(w, httpError(http.StatusMethodNotAllowed))
	}
}

func (s *Sim) handleRestartFrontend(w http.ResponseWriter, _ *http.Request) {
	s.RestartFrontend()
	writeJSON(w, http.StatusOK, map[string]string{"status": "restarted"})
}

func (s *Sim) handleRestartWorkers(w http.ResponseWriter, r *http.Request) {
	if err := s.RestartWorkers(r.Context()); err != nil {
		writeAPIError(w, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, msg: "restart workers: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"status":          "restarting",
		"startup_seconds": s.cfg.scaled(s.cfg.StartupTime).Seconds(),
	})
}

// State is the body of GET /admin/state.
type State struct {
	Mode          Mode     `json:"mode"`
	Ready         bool     `json:"ready"`
	Workers       []string `json:"workers"`
	InFlight      []int    `json:"in_flight"`
	IndexedBlocks int      `json:"indexed_blocks"`
}

func (s *Sim) handleState(w http.ResponseWriter, _ *http.Request) {
	st := State{
		Mode:          s.Mode(),
		Ready:         s.phase(time.Now()) == phaseReady,
		InFlight:      s.router.load(),
		IndexedBlocks: s.idx.size(),
	}
	for _, wk := range s.workers {
		st.Workers = append(st.Workers, wk.name)
	}
	writeJSON(w, http.StatusOK, st)
}

// request is what both endpoints reduce to.
type request struct {
	chat         bool
	model        string
	stream       bool
	includeUsage bool
	maxTokens    *int
	minTokens    *int
	ignoreEOS    bool
	seed         int64
	prompt       []uint32
	prefix       string
	// received is when the handler started, before the body was read:
	// the frontend's modelled time counts from here (serveRequest).
	received time.Time
}

func (s *Sim) handleChat(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	var body openai.ChatCompletionRequest
	if !s.decode(w, r, &body) {
		return
	}
	switch {
	case body.Messages == nil:
		s.reject(w, "chat_completions", body.Stream, validationError("missing", "Field required", "body", "messages"))
		return
	case len(body.Messages) == 0:
		// vLLM would render an empty conversation; OpenAI rejects it, and
		// so does the simulator, in vLLM's words for a too short list.
		s.reject(w, "chat_completions", body.Stream, validationError("too_short", "List should have at least 1 item after validation, not 0", "body", "messages"))
		return
	}
	req := &request{
		chat: true, model: body.Model, stream: body.Stream,
		maxTokens: body.MaxTokens, minTokens: body.MinTokens, received: received,
	}
	req.includeUsage = body.StreamOptions != nil && body.StreamOptions.IncludeUsage
	req.ignoreEOS = body.IgnoreEOS != nil && *body.IgnoreEOS
	if body.Seed != nil {
		req.seed = *body.Seed
	}
	req.prompt = chatTokens(body.Messages)
	// kubeai's PrefixHash hashes a prefix of the first user message.
	for _, m := range body.Messages {
		if m.Role == openai.RoleUser {
			req.prefix = m.Content[:min(len(m.Content), s.cfg.PrefixChars)]
			break
		}
	}
	s.serveRequest(w, r, req)
}

func (s *Sim) handleCompletion(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	var body openai.CompletionRequest
	if !s.decode(w, r, &body) {
		return
	}
	if body.Prompt == "" {
		// vLLM's CompletionRequest validator, for a missing or empty prompt.
		s.reject(w, "completions", body.Stream, validationError("value_error", "Value error, Either prompt or prompt_embeds must be provided and non-empty.", "body"))
		return
	}
	req := &request{
		model: body.Model, stream: body.Stream,
		maxTokens: body.MaxTokens, minTokens: body.MinTokens, received: received,
	}
	req.includeUsage = body.StreamOptions != nil && body.StreamOptions.IncludeUsage
	req.ignoreEOS = body.IgnoreEOS != nil && *body.IgnoreEOS
	if body.Seed != nil {
		req.seed = *body.Seed
	}
	req.prompt = completionTokens(body.Prompt)
	req.prefix = body.Prompt[:min(len(body.Prompt), s.cfg.PrefixChars)]
	s.serveRequest(w, r, req)
}

// decode reads a JSON body; on failure it has answered 400 (or 405) with
// the validation error vLLM's FastAPI app would give.
func (s *Sim) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost {
		writeAPIError(w, httpError(http.StatusMethodNotAllowed))
		return false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: typeBadRequest, msg: "read body: " + err.Error()})
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		writeAPIError(w, decodeError(err))
		return false
	}
	return true
}

func (s *Sim) reject(w http.ResponseWriter, endpoint string, stream bool, e *apiError) {
	rt := "unary"
	if stream {
		rt = "stream"
	}
	s.m.feRequests.WithLabelValues(s.cfg.Model, endpoint, rt, "error").Inc()
	writeAPIError(w, e)
}

// validate checks req against the model and works out the length limits,
// in the order and words of vLLM's OpenAIServing._check_model,
// _validate_input and SamplingParams._verify_args.
func (s *Sim) validate(req *request) (lengthParams, *apiError) {
	if req.model != "" && req.model != s.cfg.Model {
		return lengthParams{}, &apiError{status: http.StatusNotFound, typ: typeNotFound, param: "model",
			msg: fmt.Sprintf("The model `%s` does not exist.", req.model)}
	}
	maxLen := s.cfg.Engine.MaxModelLen
	n := len(req.prompt)
	if n >= maxLen {
		return lengthParams{}, paramError("input_tokens", n, fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", maxLen, n))
	}
	p := lengthParams{maxTokens: maxLen - n, ignoreEOS: req.ignoreEOS}
	if req.maxTokens != nil {
		mt := *req.maxTokens
		if n+mt > maxLen {
			return p, paramError("max_tokens", mt, fmt.Sprintf(
				"'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
				mt, maxLen, n, mt, maxLen, n))
		}
		if mt < 1 {
			return p, paramError("max_tokens", mt, fmt.Sprintf("max_tokens must be at least 1, got %d.", mt))
		}
		p.maxTokens, p.capped = mt, true
	}
	if req.minTokens != nil {
		mt := *req.minTokens
		switch {
		case mt < 0:
			return p, &apiError{status: http.StatusBadRequest, typ: typeBadRequest,
				msg: fmt.Sprintf("min_tokens must be greater than or equal to 0, got %d.", mt)}
		case mt > p.maxTokens:
			return p, &apiError{status: http.StatusBadRequest, typ: typeBadRequest,
				msg: fmt.Sprintf("min_tokens must be less than or equal to max_tokens=%d, got %d.", p.maxTokens, mt)}
		}
		p.minTokens = mt
	}
	return p, nil
}

func (s *Sim) serveRequest(w http.ResponseWriter, r *http.Request, req *request) {
	start := req.received
	endpoint := "completions"
	if req.chat {
		endpoint = "chat_completions"
	}
	ph, epoch := s.admit(start)
	switch ph {
	case phaseLoading:
		s.reject(w, endpoint, req.stream, &apiError{status: http.StatusNotFound, typ: typeNotFound, param: "model",
			msg: fmt.Sprintf("Model not found: %s", req.model)})
		return
	case phaseListed:
		s.reject(w, endpoint, req.stream, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable,
			msg: "The model is loading; no worker is ready to serve it yet."})
		return
	}
	lp, aerr := s.validate(req)
	if aerr != nil {
		s.reject(w, endpoint, req.stream, aerr)
		return
	}

	bs := s.cfg.Engine.BlockSize
	sq := &seq{
		prompt:  req.prompt,
		hashes:  blockHashes(req.prompt, bs),
		out:     generate(req.prompt, req.seed, s.cfg.Output, lp, !req.chat),
		arrival: start,
		notify:  make(chan struct{}, 1),
		epoch:   epoch,
	}
	// In flight from here, as in Dynamo's frontend, whose gauge counts a
	// request from when it is admitted, through its preprocessing.
	inflight := s.m.feInflight.WithLabelValues(s.cfg.Model)
	inflight.Inc()
	defer inflight.Dec()
	// The frontend's own time comes before routing, as tokenising and
	// templating do in Dynamo and vLLM. It counts from the request's
	// arrival, so the simulator's own work of that kind (reading and
	// decoding the body, tokenising, hashing blocks, drawing the answer)
	// is part of it rather than added to it: at time scale 8 that work,
	// 0.4-0.8 ms of wall time on a loaded host, would otherwise add 3-6 ms
	// of simulated time, varying from request to request.
	if d := time.Until(start.Add(s.cfg.scaled(s.cfg.Frontend.Delay(len(req.prompt))))); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.quit:
			t.Stop()
			s.reject(w, endpoint, req.stream, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, msg: errShutdown.Error()})
			return
		}
	}
	mode := s.router.getMode()
	t := s.router.route(&routeInput{tokens: len(req.prompt), hashes: sq.hashes, prefix: req.prefix})
	defer s.router.done(t)
	sq.grow = func() { s.router.grow(t) }
	wk := s.workers[t.worker]
	s.m.routed.WithLabelValues(string(mode), wk.name).Inc()
	s.m.feISL.WithLabelValues(s.cfg.Model).Observe(float64(len(req.prompt)))

	ctx := r.Context()
	select {
	case wk.submit <- sq:
	case <-ctx.Done():
		return
	case <-s.quit:
		s.reject(w, endpoint, req.stream, &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, msg: errShutdown.Error()})
		return
	}
	w.Header().Set(WorkerHeader, wk.name)

	// The handler waits on one channel: the client's going away pokes the
	// sequence as the worker does, so each wake-up is a plain receive
	// rather than a select over two channels, whose locking was 4% of the
	// simulator's CPU at 8,000 streams.
	var gone atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		gone.Store(true)
		sq.poke()
	})
	defer stop()
	rt := "unary"
	var err error
	if req.stream {
		rt = "stream"
		err = s.stream(w, req, sq, &gone, t, start)
	} else {
		err = s.unary(w, req, sq, &gone, t, start)
	}
	status2 := "success"
	if err != nil {
		status2 = "error"
		if errors.Is(err, errClientGone) {
			wk.abort(sq)
		}
	}
	s.m.feRequests.WithLabelValues(s.cfg.Model, endpoint, rt, status2).Inc()
}

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
