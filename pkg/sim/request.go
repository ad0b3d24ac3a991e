package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

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
