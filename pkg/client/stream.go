package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/sse"
)

var doneData = []byte("[DONE]")

// streamState is the reusable per-stream scratch space: the SSE reader with
// its buffers and the chunk that each event is decoded into. Pooled in the
// Client so that steady-state streams allocate little. What a token
// touches comes first and in the struct itself (the chunk's shape and
// choices, then the reader's state), so that it takes the fewest cache
// lines and no pointer to follow.
type streamState struct {
	chunk wireChunk
	rd    sse.Reader
	body  timedBody
	dec   chunkDecoder
}

// chunkDecoder decodes one JSON value per call. It reuses one json.Decoder,
// whose scanner and decode state survive between values; json.Unmarshal would
// allocate them again for every chunk of every stream.
type chunkDecoder struct {
	src bytes.Reader
	dec *json.Decoder
}

var errTrailingData = errors.New("trailing data after the JSON value")

func (d *chunkDecoder) decode(data []byte, v any) error {
	if d.dec == nil {
		d.dec = json.NewDecoder(&d.src)
	}
	d.src.Reset(data)
	err := d.dec.Decode(v)
	if err == nil && d.dec.More() {
		err = errTrailingData
	}
	if err != nil {
		d.dec = nil // a Decoder's error is sticky and it may hold leftovers
	}
	return err
}

// timedBody records when the first body byte was read and whether the body
// was read to its end.
type timedBody struct {
	r     io.Reader
	first time.Time
	eof   bool
}

func (t *timedBody) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && t.first.IsZero() {
		t.first = time.Now()
	}
	if err == io.EOF {
		t.eof = true
	}
	return n, err
}

// wireChunk is what the client needs of a streamed chunk of either endpoint.
// It is decoded into again and again, so fields that would allocate for every
// chunk (id, model) are not decoded, and Object reuses its bytes.
type wireChunk struct {
	shape   chunkShape   // the last fast-path decode's, for matchToken
	Choices []wireChoice `json:"choices"`

	Object  json.RawMessage `json:"object"`
	Message string          `json:"message"` // older vLLM in-stream error layout
	Type    string          `json:"type"`
	Usage   *openai.Usage   `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Code    json.RawMessage `json:"code"` // older vLLM in-stream error layout
}

type wireChoice struct {
	Delta        wireDelta `json:"delta"`
	Text         string    `json:"text"`
	FinishReason string    `json:"finish_reason"` // null leaves it empty
}

type wireDelta struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
}

// reset clears c for the next decode: encoding/json leaves absent fields and
// the tails of reused slice elements as they were.
func (c *wireChunk) reset() {
	c.shape.ok = false
	c.Object = c.Object[:0]
	c.Message, c.Type = "", ""
	clear(c.Choices[:cap(c.Choices)])
	c.Choices = c.Choices[:0]
	c.Usage = nil
	c.Error = c.Error[:0]
	c.Code = c.Code[:0]
}

// run is the state of one Stream call.
//
// A run lives for one Stream call and no longer, like an http.Request, so it
// may keep the caller's context: error classification needs to tell the
// caller's cancellation from the request's own timeouts.
type run struct {
	// tok is own, or while an event loop reads the response the copy in
	// the loop's exchange (loopConn.send), next to the connection's own
	// state: with thousands of streams each token finds its stream's state
	// out of the cache, and the loop's token then touches no line of the
	// run's.
	tok      *tokens
	own      tokens
	finished bool
	draining bool // [DONE] came: the outcome is recorded, the body's end is read

	reasoning strings.Builder
	c         *Client
	ctx       context.Context // the caller's
	rctx      context.Context // the request's: caller's plus timeouts
	cancel    context.CancelCauseFunc
	res       *Result
	start     time.Time
	ftTimer   *time.Timer
}

// tokens is what a content token updates: the answer's text, the gaps
// between tokens (Result.ITL once the stream is over), the content chunks
// and the last one's stamp.
type tokens struct {
	itl    []time.Duration
	text   []byte
	last   time.Time
	chunks int
}

// answer is the text as a string, without a copy: the tokens are not
// written again once the answer is taken.
func (t *tokens) answer() string {
	return unsafe.String(unsafe.SliceData(t.text), len(t.text))
}

// Stream sends req and reads the streamed response to its end, measuring it.
// It never returns nil and never panics: every failure is reported in
// Result.Class and Result.Err, and the Result holds whatever was measured up
// to the failure. ctx cancels the request (ClassCancelled). Stream is safe
// for concurrent use; each call owns the Result it returns.
func (c *Client) Stream(ctx context.Context, req *Request) (res *Result) {
	res = &Result{}
	defer func() {
		// A bug here must cost one request, not the whole run.
		// The closed set has no class for a bug of ours; protocol is the
		// nearest (the panic most likely came from parsing what the server
		// sent), and the error and the log say what happened.
		if p := recover(); p != nil {
			c.logger.Error("panic in stream", "panic", fmt.Sprint(p))
			res.Class, res.Err = ClassProtocol, fmt.Errorf("stream request: panic: %v", p)
		}
	}()
	if req == nil {
		res.Class, res.Err = ClassProtocol, fmt.Errorf("stream request: %w", ErrNilRequest)
		return res
	}
	r := run{c: c, ctx: ctx, res: res}
	r.tok = &r.own
	n := c.itlCap
	if req.MaxTokens > 0 {
		n = min(req.MaxTokens, itlInitial)
	}
	if n > 1 {
		r.own.itl = make([]time.Duration, 0, n-1)
	}
	r.do(ctx, req)
	res.ITL, res.Text, res.Reasoning = r.tok.itl, r.tok.answer(), r.reasoning.String()
	if !res.UsageReported {
		res.OutputTokens = r.tok.chunks
	}
	if res.Err != nil && c.logger.IsTrace() {
		c.logger.Trace("request failed", "class", res.Class, "status", res.Status, "error", res.Err)
	}
	return res
}

// do runs the request; failures land in r.res.
func (r *run) do(ctx context.Context, req *Request) {
	c := r.c
	rctx := ctx
	r.rctx = rctx
	defer func() {
		if r.cancel != nil {
			r.cancel(nil)
		}
	}()
	if c.reqTimeout > 0 || c.firstToken > 0 || c.h1 == nil {
		rctx = r.cancelable(rctx)
	}
	if c.reqTimeout > 0 {
		var stop context.CancelFunc
		rctx, stop = context.WithTimeoutCause(rctx, c.reqTimeout, ErrRequestTimeout)
		defer stop()
		r.rctx = rctx
	}
	cancel := r.cancel

	// Start is taken just before the request is handed to the transport, as
	// vLLM's benchmark does. It therefore includes getting a connection: a
	// pool hit costs microseconds, while a new dial (or a server slow to
	// accept) is part of what a user would wait for. Warm pre-opens
	// connections so runs do not measure dials.
	// The request is built before the clock starts.
	var (
		body   *requestBody       // HTTP/1.1
		hreq   *http.Request      // HTTP/2
		reused = new(atomic.Bool) // HTTP/2
	)
	if c.h1 != nil {
		body = c.bodies.newBody(c.body, req)
	} else {
		traced := httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
		})
		var err error
		if hreq, err = c.newRequest(traced, req); err != nil {
			r.res.Class, r.res.Err = ClassProtocol, fmt.Errorf("stream request: %w", err)
			return
		}
	}
	r.start = time.Now()
	r.res.Start = r.start
	if c.firstToken > 0 {
		r.ftTimer = time.AfterFunc(c.firstToken, func() { cancel(ErrFirstTokenTimeout) })
		defer r.ftTimer.Stop()
	}
	var (
		resp     *http.Response
		respBody io.Reader
		x        *exchange
		err      error
	)
	st := c.states.Get().(*streamState)
	defer func() {
		st.body = timedBody{}
		st.rd.Reset(nil)
		c.states.Put(st)
	}()
	if c.h1 != nil {
		x, err = c.h1.roundTrip(rctx, c, req, body, r, st)
		if err == nil {
			resp, respBody = x.resp, x.body
			reused.Store(x.c.reused)
		}
	} else {
		// Call the transport directly: http.Client.Do would, on every
		// request, clone the headers and build closures for following
		// redirects, which the client never does (a 3xx is reported as it
		// is).
		resp, err = c.transport.RoundTrip(hreq)
		if err == nil {
			respBody = resp.Body
		}
	}
	headersAt := time.Now()
	pushed := x != nil && x.pushed
	if pushed {
		headersAt = x.lx.headersAt
	}
	if err != nil {
		r.fail(headersAt, err, ClassConnect, "send request")
		return
	}
	r.res.Status = resp.StatusCode
	r.res.Worker, r.res.WorkerHeader = workerFrom(resp.Header, c.workerHeaders)
	r.res.ConnReused = reused.Load()

	if !pushed {
		st.body = timedBody{r: respBody}
	}
	// Runs before st is reset: the connection is reusable only if the body
	// was read to its end.
	defer func() {
		if x != nil {
			x.finish(st.body.eof)
		} else {
			_ = resp.Body.Close()
		}
	}()
	defer func() {
		if !st.body.first.IsZero() {
			r.res.TTFB = st.body.first.Sub(r.start)
		} else {
			r.res.TTFB = headersAt.Sub(r.start)
		}
	}()

	if pushed {
		// The loop has read the stream and recorded its outcome, unless
		// the request's context ended first (the connection is closed).
		if x.aborted && !r.draining {
			r.end(st, sse.Event{}, fmt.Errorf("read event stream: %w", net.ErrClosed), time.Now())
		}
		st.body.first, st.body.eof = x.lx.first, x.lx.eof && !x.aborted
		return
	}
	if resp.StatusCode != http.StatusOK {
		r.httpError(&st.body, resp.StatusCode, resp.Header)
		return
	}
	if isJSON(resp.Header.Get("Content-Type")) {
		msg := r.readMessage(&st.body)
		r.fail(time.Now(), fmt.Errorf("%w: %s", ErrNotStreamed, msg), ClassProtocol, "read stream")
		return
	}
	st.rd.Reset(&st.body)
	r.read(st)
}

// cancelable gives the request a context of its own, which r.cancel ends
// (a timeout, the drain after [DONE] on a blocking read), and returns it;
// ctx is the request's context so far.
// Without timeouts a request an event loop reads needs none: nothing but
// the caller's context ends it there, and the loop bounds the drain
// itself. Its context is then the caller's, which spares each request a
// child context, its done channel, and its entry in the caller's map of
// children (about 4 µs of CPU a request at 4,000 sessions).
func (r *run) cancelable(ctx context.Context) context.Context {
	if r.cancel == nil {
		r.rctx, r.cancel = context.WithCancelCause(ctx)
	}
	return r.rctx
}

// fail records a failure at instant at.
func (r *run) fail(at time.Time, err error, fallback Class, op string) {
	class, err := classify(r.ctx, r.rctx, err, fallback)
	r.res.E2E = at.Sub(r.start)
	r.res.Class, r.res.Err = class, fmt.Errorf("%s: %w", op, err)
}

// succeed records a clean end of the stream at instant at.
func (r *run) succeed(at time.Time) {
	r.res.E2E = at.Sub(r.start)
	r.res.Class, r.res.Err = ClassOK, nil
}

// httpError records a non-200 response: its class by status, the server's
// message from a bounded part of its body and its Retry-After.
func (r *run) httpError(body io.Reader, status int, h http.Header) {
	msg := r.readMessage(body)
	at := time.Now()
	retry := ""
	if v := h.Get("Retry-After"); v != "" {
		retry = r.c.redact(clean(v[:min(len(v), maxRetryAfter)]))
	}
	err := &HTTPError{StatusCode: status, Message: msg, RetryAfter: retry}
	r.res.E2E = at.Sub(r.start)
	r.res.ServerMessage, r.res.RetryAfter = msg, retry
	r.res.Class, r.res.Err = statusClass(status), fmt.Errorf("send request: %w", err)
	if r.ctx.Err() != nil {
		r.res.Class = ClassCancelled
	}
}

// readMessage reads a bounded prefix of an error body into a clean message,
// then discards a bounded remainder so the connection may be reused.
func (r *run) readMessage(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, errorBodyLimit))
	_, _ = io.CopyN(io.Discard, body, discardLimit)
	return r.c.redact(errorMessage(b))
}

// read consumes the event stream with blocking reads.
func (r *run) read(st *streamState) {
	for {
		ev, err := st.rd.Next()
		if r.step(st, ev, err, time.Now()) {
			if r.draining {
				r.drain(st)
			}
			return
		}
	}
}

// step handles what the SSE reader's Next returned at instant now. It
// reports whether the request's outcome is decided: an error, the end of
// the stream or [DONE] (then r.draining is set: the body's end remains).
func (r *run) step(st *streamState, ev sse.Event, err error, now time.Time) bool {
	if err != nil {
		r.end(st, ev, err, now)
		return true
	}
	done, err := r.event(st, ev, now)
	if err != nil {
		class := ClassProtocol
		var se *StreamError
		if errors.As(err, &se) {
			// A coded error is classed as a response of its status
			// would be: a 200 stream that says 400 is a bad request.
			r.res.ServerMessage = se.Message
			class = se.Class()
		}
		r.fail(now, err, class, "read stream")
		return true
	}
	if done {
		r.succeed(now)
		r.draining = true
		return true
	}
	return false
}

// end handles the error that ended the event stream.
func (r *run) end(st *streamState, ev sse.Event, err error, now time.Time) {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		if errors.Is(err, io.ErrUnexpectedEOF) && r.ctx.Err() == nil && r.rctx.Err() == nil {
			// The body ended inside an event. Be lenient with servers that
			// omit the final blank line: use the event if it is whole.
			if done, perr := r.event(st, ev, now); perr == nil && done {
				r.succeed(now)
				return
			}
		}
		if r.finished {
			r.succeed(now)
			return
		}
		r.fail(now, ErrTruncated, ClassStreamCut, "read stream")
	case errors.Is(err, sse.ErrLineTooLong), errors.Is(err, sse.ErrEventTooLong):
		r.fail(now, err, ClassProtocol, "read stream")
	default:
		// A read error: reset, GOAWAY, an HTTP/2 protocol error, cancel or
		// timeout.
		class, _ := classify(r.ctx, r.rctx, err, ClassStreamCut)
		if class == ClassStreamCut && r.finished {
			r.succeed(now)
			return
		}
		if class == ClassStreamCut {
			err = fmt.Errorf("%w: %w", ErrTruncated, err)
		}
		r.fail(now, err, ClassStreamCut, "read stream")
	}
}

// event handles one event; done reports [DONE].
func (r *run) event(st *streamState, ev sse.Event, now time.Time) (done bool, err error) {
	switch ev.Type {
	case "", "message":
	case "error":
		return false, &StreamError{Message: r.c.redact(clean(string(ev.Data)))}
	default:
		return false, nil // other event types carry nothing we measure
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return false, nil
	}
	if bytes.Equal(data, doneData) {
		return true, nil
	}
	ch := &st.chunk
	// A token chunk shaped as the previous one updates its decode in place;
	// the usual token's text is used where it lies (plain).
	plain, shaped := ch.matchToken(data)
	if !shaped {
		ch.reset()
		if !ch.parseFast(data) {
			ch.reset()
			if err := st.dec.decode(data, ch); err != nil {
				return false, fmt.Errorf("decode chunk %q: %w", r.c.redact(clean(string(data[:min(len(data), 64)]))), err)
			}
		}
	}
	if serr := r.streamError(ch); serr != nil {
		return false, serr
	}
	var content bool
	if plain != nil {
		content = r.plainToken(ch, plain)
	} else {
		content = r.choices(ch)
	}
	if u := ch.Usage; u != nil {
		r.res.UsageReported = true
		r.res.PromptTokens = u.PromptTokens
		r.res.OutputTokens = u.CompletionTokens
		r.res.CachedTokens = 0
		if u.PromptTokensDetails != nil {
			r.res.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	if t := r.tok; content && t.chunks > 0 {
		t.add(now)
	} else if content {
		r.res.TTFT = now.Sub(r.start)
		if r.ftTimer != nil {
			r.ftTimer.Stop()
		}
		t.last = now
		t.chunks++
	}
	return false, nil
}

// choices adds the chunk's text and reasoning to the answer's and takes
// its finish reason. It reports whether the chunk carried content.
func (r *run) choices(ch *wireChunk) bool {
	content := false
	for i := range ch.Choices {
		cc := &ch.Choices[i]
		text := cc.Delta.Content
		if text == "" {
			text = cc.Text
		}
		reasoning := cc.Delta.ReasoningContent
		if reasoning == "" {
			reasoning = cc.Delta.Reasoning
		}
		if text != "" || reasoning != "" {
			content = true
			r.tok.text = append(r.tok.text, text...)
			r.reasoning.WriteString(reasoning)
		}
		if cc.FinishReason != "" {
			r.res.FinishReason = cc.FinishReason
			r.finished = true
		}
	}
	return content
}

// plainToken is choices for a chunk matchToken took with
// its token's text in data: it adds text to the answer or the reasoning
// and takes the choice's finish reason. It reports whether the chunk
// carried content.
func (r *run) plainToken(ch *wireChunk, text []byte) bool {
	cc := &ch.Choices[0]
	if len(text) > 0 {
		switch ch.shape.kind {
		case tokenReasoningContent, tokenReasoning:
			r.reasoning.Write(text)
		default:
			r.tok.text = append(r.tok.text, text...)
		}
	}
	if cc.FinishReason != "" {
		r.res.FinishReason = cc.FinishReason
		r.finished = true
	}
	return len(text) > 0
}

// streamError returns the server's error when the chunk is one.
func (r *run) streamError(ch *wireChunk) error {
	if e := bytes.TrimSpace(ch.Error); len(e) > 0 && !bytes.Equal(e, []byte("null")) {
		var d openai.ErrorDetail
		if json.Unmarshal(e, &d) == nil {
			return &StreamError{Type: r.c.redact(clean(d.Type)), Code: r.c.redact(errorCode(d.Code)), Message: r.c.redact(clean(d.Message))}
		}
		var s string
		if json.Unmarshal(e, &s) == nil {
			return &StreamError{Message: r.c.redact(clean(s))}
		}
		return &StreamError{Message: r.c.redact(clean(string(e)))}
	}
	if bytes.Equal(ch.Object, []byte(`"error"`)) {
		return &StreamError{Type: r.c.redact(clean(ch.Type)), Code: r.c.redact(errorCode(ch.Code)), Message: r.c.redact(clean(ch.Message))}
	}
	return nil
}

// drain reads what follows [DONE] (normally just the end of the chunked body)
// for at most drainTimeout, so that an HTTP/1.1 connection goes back to the
// pool instead of being closed.
func (r *run) drain(st *streamState) {
	t := time.AfterFunc(drainTimeout, func() { r.cancel(errDrained) })
	defer t.Stop()
	for {
		if _, err := st.rd.Next(); err != nil {
			return
		}
	}
}
