package result

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// MaxErrorLen bounds the error message saved per request, in bytes.
const MaxErrorLen = 512

// ErrClosed is returned by RequestLog.Write after Close.
var ErrClosed = errors.New("request log closed")

// Request is one line of the --save-requests JSON Lines file. Times are UTC
// RFC 3339 with nanoseconds and also microseconds since the run's start;
// durations are milliseconds. IntendedSend is omitted when the turn had no
// schedule.
type Request struct {
	Conversation int    `json:"conversation"`
	Turn         int    `json:"turn"`
	Window       uint32 `json:"window"`
	Restarted    bool   `json:"restarted,omitempty"`

	IntendedSend   time.Time `json:"intended_send,omitzero"`
	IntendedSendUs *int64    `json:"intended_send_us,omitempty"`
	ActualSend     time.Time `json:"actual_send"`
	ActualSendUs   int64     `json:"actual_send_us"`
	LagMs          float64   `json:"lag_ms"`

	TTFTMs   float64 `json:"ttft_ms"`
	TTFBMs   float64 `json:"ttfb_ms"`
	E2EMs    float64 `json:"e2e_ms"`
	TPOTMs   float64 `json:"tpot_ms"`
	ITLCount int     `json:"itl_count"`

	PromptTokens  int  `json:"prompt_tokens"`
	OutputTokens  int  `json:"output_tokens"`
	CachedTokens  int  `json:"cached_tokens"`
	UsageReported bool `json:"usage_reported"`

	FinishReason string `json:"finish_reason,omitempty"`
	Status       int    `json:"status,omitempty"`
	ErrorClass   string `json:"error_class,omitempty"`
	Error        string `json:"error,omitempty"`
	Worker       string `json:"worker,omitempty"`
}

// OK reports whether the request succeeded.
func (r *Request) OK() bool { return r.ErrorClass == "" && r.Error == "" }

// RequestLog writes one Request per line. It is safe for concurrent use:
// one mutex guards a bufio.Writer. The first write error is sticky and
// returned by every later call.
type RequestLog struct {
	mu     sync.Mutex
	w      io.Writer
	bw     *bufio.Writer
	enc    *json.Encoder
	start  time.Time
	err    error
	closed bool
}

// NewRequestLog returns a log writing to w; start is the run's start, the
// origin of the microsecond offsets. Close flushes and, when w is an
// io.Closer, closes w.
func NewRequestLog(w io.Writer, start time.Time) *RequestLog {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &RequestLog{w: w, bw: bw, enc: enc, start: start}
}

// CreateRequestLog creates (truncates) the file at path and returns a log
// that owns it.
func CreateRequestLog(path string, start time.Time) (*RequestLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create request log: %w", err)
	}
	return NewRequestLog(f, start), nil
}

// Write appends one line for s. A sample without a Result is skipped.
func (l *RequestLog) Write(s *record.Sample) error {
	if s == nil || s.Result == nil {
		return nil
	}
	r := l.request(s)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		return l.err
	}
	if err := l.enc.Encode(&r); err != nil {
		l.err = fmt.Errorf("write request log: %w", err)
	}
	return l.err
}

// Flush writes buffered lines to the underlying writer.
func (l *RequestLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.flushLocked()
}

func (l *RequestLog) flushLocked() error {
	if l.err != nil {
		return l.err
	}
	if err := l.bw.Flush(); err != nil {
		l.err = fmt.Errorf("flush request log: %w", err)
	}
	return l.err
}

// Close flushes, syncs the underlying writer to stable storage when it can
// (a file), and closes it when it is an io.Closer. It returns the first
// error of the log's life, so a line lost to a failed write is reported
// here. It is idempotent; later calls return nil.
func (l *RequestLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.flushLocked()
	if s, ok := l.w.(interface{ Sync() error }); ok && err == nil {
		if serr := s.Sync(); serr != nil {
			err = fmt.Errorf("sync request log: %w", serr)
		}
	}
	if c, ok := l.w.(io.Closer); ok {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close request log: %w", cerr)
		}
	}
	return err
}

// request converts a sample; it needs no lock.
func (l *RequestLog) request(s *record.Sample) Request {
	res := s.Result
	r := Request{
		Conversation:  s.Conversation,
		Turn:          s.Turn,
		Window:        s.Window,
		Restarted:     s.Restarted,
		ActualSend:    res.Start.UTC(),
		ActualSendUs:  res.Start.Sub(l.start).Microseconds(),
		LagMs:         ms(s.Lag()),
		TTFTMs:        ms(res.TTFT),
		TTFBMs:        ms(res.TTFB),
		E2EMs:         ms(res.E2E),
		TPOTMs:        ms(res.TPOT()),
		ITLCount:      len(res.ITL),
		PromptTokens:  res.PromptTokens,
		OutputTokens:  res.OutputTokens,
		CachedTokens:  res.CachedTokens,
		UsageReported: res.UsageReported,
		FinishReason:  res.FinishReason,
		Status:        res.Status,
		ErrorClass:    string(res.Class),
		Worker:        res.Worker,
	}
	if !s.Intended.IsZero() {
		r.IntendedSend = s.Intended.UTC()
		us := s.Intended.Sub(l.start).Microseconds()
		r.IntendedSendUs = &us
	}
	if res.Err != nil {
		r.Error = errorText(res.Err.Error())
		if r.ErrorClass == "" {
			// An error without a class is still a failure; never let a
			// reader take it for a success.
			r.ErrorClass = "unknown"
		}
	}
	return r
}

// secretLike matches credentials that must never reach a file even if an
// error message quoted them: bearer tokens and OpenAI-style keys.
var secretLike = regexp.MustCompile(`(?i)bearer\s+[^\s"']+|\bsk-[A-Za-z0-9_\-]{8,}`)

// errorText bounds an error message and masks anything key-like. Client
// errors carry no key by contract; this is a second line of defence.
func errorText(msg string) string {
	msg = secretLike.ReplaceAllString(msg, "[REDACTED]")
	if len(msg) <= MaxErrorLen {
		return msg
	}
	cut := MaxErrorLen
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// ReadRequests reads a JSON Lines file written by RequestLog. Blank lines
// are skipped; a malformed line is an error naming its line number.
func ReadRequests(r io.Reader) ([]Request, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var out []Request
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var req Request
		if err := json.Unmarshal(line, &req); err != nil {
			return out, fmt.Errorf("read request line %d: %w", n, err)
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read requests: %w", err)
	}
	return out, nil
}

// NearestRank is the nearest-rank percentile (p in (0, 100]) of values:
// the smallest value with at least p% of the values at or below it. It
// sorts a copy; NaN for no values or p outside (0, 100].
func NearestRank(values []float64, p float64) float64 {
	if len(values) == 0 || !(p > 0 && p <= 100) {
		return math.NaN()
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	rank := int(math.Ceil(p / 100 * float64(len(v))))
	if rank < 1 {
		rank = 1
	}
	return v[rank-1]
}
