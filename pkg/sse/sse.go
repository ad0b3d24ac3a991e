package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultMaxLine is the line and event size limit used when NewReader is
// given a limit of zero or less.
const DefaultMaxLine = 1 << 20

const (
	// initialBuf is the first read buffer. Typical LLM stream events are a
	// few hundred bytes, so 4 KiB keeps thousands of concurrent streams cheap.
	initialBuf = 4 << 10
	// retainBuf is the largest buffer Reset keeps; a Reader that grew past it
	// for one long stream gives the memory back before it is reused.
	retainBuf = 64 << 10
	// maxEmptyReads mirrors bufio: an io.Reader that keeps returning 0, nil
	// is broken.
	maxEmptyReads = 100
)

// ErrLineTooLong is returned by Next when a line is longer than the Reader's
// limit. The Reader stops buffering at the limit, so memory stays bounded.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrEventTooLong is returned by Next when the data of one event, with its
// "\n" separators, is longer than the Reader's limit.
var ErrEventTooLong = errors.New("sse: event too long")

// ErrWouldBlock is what a non-blocking source returns from Read when it has
// no byte now but may have later. Next then returns it too, keeping the
// partial line and event it holds, and continues where it stopped when it is
// called again. It is the only error that does not end a Reader, which lets
// a caller feed it from a readiness callback instead of a blocking read.
var ErrWouldBlock = errors.New("sse: no input yet")

// Event is one dispatched server-sent event. An Event is a plain value; its
// Data aliases the Reader's buffer and is valid only until the next call to
// Next or Reset on the Reader that returned it. Copy Data to keep it.
type Event struct {
	// Type is the event field; empty means the default "message" type.
	Type string
	// Data is the data of the event: each data line's value, joined with
	// "\n".
	Data []byte
	// ID is the last event ID in force when the event was dispatched. Per the
	// specification it persists across events until an id field changes it.
	ID string
}

// Reader parses events from an underlying io.Reader. A Reader is not safe for
// concurrent use; one goroutine owns it, typically for one HTTP response.
type Reader struct {
	// What Parse reads comes first, in one cache line: a client reading
	// thousands of streams touches each Reader once per token.
	max     int
	r, w    int   // unread bytes are buf[r:w]
	skipLF  bool  // the last line ended in CR: drop a LF that starts the next
	started bool  // the byte-order mark check is done
	reset   bool  // the previous event was returned: clear data and type first
	pending bool  // a field line was seen since the last dispatch
	stopErr error // sticky terminal error returned by Next
	id      string

	rd   io.Reader
	buf  []byte
	scan int // buf[r:scan] is known to hold no line terminator
	rerr error

	data   []byte // data lines, each followed by '\n'
	typ    []byte
	typStr string
	retry  time.Duration
}

// NewReader returns a Reader that parses events from r. maxLine bounds both
// the length of one line (without its terminator) and the size of one event's
// data; zero or less selects DefaultMaxLine. No buffer is allocated until the
// first call to Next.
func NewReader(r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Reader{rd: r, max: maxLine}
}

// Reset makes the Reader read from r as if it were new, keeping its limit and
// (when they are small) its buffers, so a pool of Readers can serve many
// streams without allocating. Reset must not be called concurrently with Next.
func (r *Reader) Reset(rd io.Reader) {
	buf, data := r.buf, r.data
	if cap(buf) > retainBuf {
		buf = nil
	}
	if cap(data) > retainBuf {
		data = nil
	}
	*r = Reader{rd: rd, max: r.max, buf: buf[:cap(buf)], data: data[:0], typStr: r.typStr}
}

// Retry returns the reconnection time from the last valid retry field, or
// zero when none was seen. Like Next, it is for the owning goroutine only.
func (r *Reader) Retry() time.Duration { return r.retry }

// Next returns the next event. At a clean end of input (the input ends
// between events) it returns io.EOF. When the input ends inside an event
// or in the middle of a line, it returns the incomplete event (an unterminated
// last line is parsed as a field) with io.ErrUnexpectedEOF; the specification
// says to discard it, but a lenient caller may inspect it. Once Next has
// returned an error it returns the same error on every later call. Read
// errors from the underlying reader are returned wrapped; use errors.Is.
func (r *Reader) Next() (Event, error) {
	if r.stopErr != nil {
		return Event{}, r.stopErr
	}
	if r.reset {
		r.data = r.data[:0]
		r.typ = r.typ[:0]
		r.reset = false
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, ErrWouldBlock) {
				return Event{}, err
			}
			return r.stop(err)
		}
		if len(line) == 0 {
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := r.field(line); err != nil {
			return r.stop(err)
		}
	}
}

// Parse is Next for a caller that holds the input itself: when the Reader
// is Idle and p begins with a whole event of one data line ending in LF
// ("data: ...\n\n", no CR, within the limit), it returns that event and
// its length, which is what Next would return after reading exactly those
// bytes. Otherwise it returns ok false and changes nothing, and the caller
// gives the bytes to Next through the Reader's source. Data aliases p. The
// check is one scan of the line instead of copying it into the Reader and
// reading it back.
func (r *Reader) Parse(p []byte) (ev Event, n int, ok bool) {
	if !r.Idle() {
		return Event{}, 0, false
	}
	data, n, ok := ParseData(p, r.max)
	if !ok {
		return Event{}, 0, false
	}
	// Input that begins with "data:" has no byte-order mark: the check
	// Next makes on the first bytes is done.
	r.started = true
	return Event{Data: data, ID: r.id}, n, true
}

// Max is the longest line or event data r accepts.
func (r *Reader) Max() int { return r.max }

// Idle reports whether Parse may take an event: the Reader holds no input
// and no event in progress. Parse leaves the Reader as it was, so a Reader
// stays Idle across Parse calls until the next Next or Reset; a caller that
// keeps that answer may use ParseData directly.
func (r *Reader) Idle() bool {
	return r.r == r.w && !r.skipLF && !r.pending && r.stopErr == nil && (r.reset || len(r.data) == 0)
}

// ParseData is Parse's scan of p for an Idle Reader whose limit is max: the
// data of the one-data-line event p begins with, and the event's length.
func ParseData(p []byte, max int) (data []byte, n int, ok bool) {
	rest, found := bytes.CutPrefix(p, []byte("data:"))
	if !found {
		return nil, 0, false
	}
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	end := bytes.IndexByte(rest, '\n')
	if end < 0 || end+1 >= len(rest) || rest[end+1] != '\n' {
		return nil, 0, false
	}
	value := rest[:end]
	line := len(p) - len(rest) + end // the line without its terminator
	if line > max || len(value) > max || bytes.IndexByte(value, '\r') >= 0 {
		return nil, 0, false
	}
	// The Reader is left as it was: a previous event's data and type (reset
	// set) are cleared by the next Next, as they would have been.
	return value, line + 2, true
}

// stop ends parsing with err. At the end of input inside an event the
// incomplete event is returned alongside io.ErrUnexpectedEOF.
func (r *Reader) stop(err error) (Event, error) {
	var ev Event
	switch {
	case errors.Is(err, errPartialEOF):
		err = io.ErrUnexpectedEOF
		ev = r.event()
	case errors.Is(err, io.EOF):
		if r.pending {
			err = io.ErrUnexpectedEOF
			ev = r.event()
		}
	case errors.Is(err, ErrLineTooLong), errors.Is(err, ErrEventTooLong), errors.Is(err, io.ErrNoProgress):
	default:
		err = fmt.Errorf("read event stream: %w", err)
	}
	r.stopErr = err
	return ev, err
}

// event builds an Event from the current buffers without resetting them.
func (r *Reader) event() Event {
	data := r.data
	if n := len(data); n > 0 {
		data = data[:n-1] // drop the '\n' that follows the last data line
	}
	if string(r.typ) != r.typStr {
		r.typStr = string(r.typ)
	}
	return Event{Type: r.typStr, Data: data, ID: r.id}
}

// dispatch handles a blank line. Per the specification an event with no data
// field is not dispatched; its type is discarded.
func (r *Reader) dispatch() (Event, bool) {
	r.pending = false
	if len(r.data) == 0 {
		r.typ = r.typ[:0]
		return Event{}, false
	}
	r.reset = true
	return r.event(), true
}

// field processes one non-blank line.
func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment
	}
	r.pending = true
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		need := len(r.data) + len(value) + 1
		if need-1 > r.max {
			return ErrEventTooLong
		}
		if need > cap(r.data) {
			r.data = grow(r.data, need, r.max+1)
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	case "event":
		r.typ = append(r.typ[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != r.id {
			r.id = string(value)
		}
	case "retry":
		if ms, ok := parseDigits(value); ok {
			r.retry = time.Duration(ms) * time.Millisecond
		}
	}
	return nil
}

// parseDigits parses an ASCII decimal number of milliseconds. It rejects
// empty input, any non-digit and values that would overflow a Duration.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	const limit = int64(1<<63-1) / int64(time.Millisecond)
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > limit {
			return 0, false
		}
	}
	return n, true
}

// errPartialEOF reports that the input ended in the middle of a line; the
// partial line has been processed as a field.
var errPartialEOF = errors.New("sse: partial line at end of input")

// readLine returns the next line without its terminator. The line aliases
// buf and is valid until the next readLine.
func (r *Reader) readLine() ([]byte, error) {
	for {
		if r.skipLF && r.r < r.w {
			if r.buf[r.r] == '\n' {
				r.r++
				if r.scan < r.r {
					r.scan = r.r
				}
			}
			r.skipLF = false
		}
		if !r.started && r.r < r.w {
			if done := r.skipBOM(); !done {
				if err := r.fill(); err != nil {
					if errors.Is(err, ErrWouldBlock) {
						return nil, err
					}
					// The input ended, possibly with the read that
					// completed the mark: a whole mark is still skipped,
					// a lone prefix of one is data.
					if !r.skipBOM() {
						r.started = true
					}
					if errors.Is(err, io.EOF) && r.r < r.w {
						continue
					}
					return nil, err
				}
				continue
			}
		}
		if r.r < r.w {
			if line, ok := r.cutLine(); ok {
				if len(line) > r.max {
					// Only reachable when the buffer outgrew the limit to
					// hold a byte-order mark; keep the limit exact anyway.
					return nil, ErrLineTooLong
				}
				return line, nil
			}
		}
		// Checked before the end of input so the outcome does not depend on
		// whether the last read returned its data together with io.EOF.
		if r.w-r.r > r.max {
			return nil, ErrLineTooLong
		}
		if r.rerr != nil {
			if r.r < r.w && errors.Is(r.rerr, io.EOF) {
				line := r.buf[r.r:r.w]
				r.r, r.scan = r.w, r.w
				if err := r.field(line); err != nil {
					return nil, err
				}
				return nil, errPartialEOF
			}
			return nil, r.rerr
		}
		if err := r.fill(); err != nil && (r.r == r.w || errors.Is(err, ErrWouldBlock)) {
			return nil, err
		}
	}
}

// cutLine looks for a terminator in the unread bytes past scan and, when it
// finds one, consumes the line and its terminator.
func (r *Reader) cutLine() ([]byte, bool) {
	seg := r.buf[r.scan:r.w]
	lf := bytes.IndexByte(seg, '\n')
	crSeg := seg
	if lf >= 0 {
		crSeg = seg[:lf]
	}
	end, skip := -1, 1
	if cr := bytes.IndexByte(crSeg, '\r'); cr >= 0 {
		end = cr
		switch {
		case cr+1 < len(seg) && seg[cr+1] == '\n':
			skip = 2
		case cr+1 == len(seg):
			// The LF of a CRLF may be in the next read; drop it then. The
			// line is complete now, so a stream that ends lines with CR is
			// not delayed.
			r.skipLF = true
		}
	} else if lf >= 0 {
		end = lf
	}
	if end < 0 {
		r.scan = r.w
		return nil, false
	}
	end += r.scan
	line := r.buf[r.r:end]
	r.r, r.scan = end+skip, end+skip
	return line, true
}

// skipBOM drops a leading UTF-8 byte-order mark. It reports false when the
// buffered bytes are a strict prefix of the mark and more input is needed.
func (r *Reader) skipBOM() bool {
	const bom = "\xef\xbb\xbf"
	b := r.buf[r.r:r.w]
	if len(b) < len(bom) && bytes.HasPrefix([]byte(bom), b) {
		return false
	}
	if bytes.HasPrefix(b, []byte(bom)) {
		r.r += len(bom)
		if r.scan < r.r {
			r.scan = r.r
		}
	}
	r.started = true
	return true
}

// fill reads more input, compacting or growing buf first. It returns the
// read error, which is also kept in rerr.
func (r *Reader) fill() error {
	if r.rerr != nil {
		return r.rerr
	}
	if r.buf == nil {
		r.buf = make([]byte, min(initialBuf, r.max+1))
	}
	if r.r == r.w {
		r.r, r.w, r.scan = 0, 0, 0
	} else if r.r > 0 && (r.w == len(r.buf) || r.r >= len(r.buf)/2) {
		n := copy(r.buf, r.buf[r.r:r.w])
		r.scan -= r.r
		r.r, r.w = 0, n
	}
	if r.w == len(r.buf) {
		// readLine fails lines longer than max before calling fill, so the
		// buffer is below its limit of max+1 here.
		nb := grow(r.buf[:r.w], len(r.buf)+1, r.max+1)
		r.buf = nb[:cap(nb)]
	}
	for range maxEmptyReads {
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			err = errors.New("sse: invalid read count")
			n = 0
		}
		r.w += n
		if errors.Is(err, ErrWouldBlock) {
			if n > 0 {
				return nil
			}
			return err // not kept: the source may have input later
		}
		if err != nil {
			r.rerr = err
			return err
		}
		if n > 0 {
			return nil
		}
	}
	r.rerr = io.ErrNoProgress
	return r.rerr
}

// grow returns b with capacity for at least need bytes, doubling but never
// past limit; need must not exceed limit.
func grow(b []byte, need, limit int) []byte {
	c := max(2*cap(b), need, 64)
	c = min(c, max(limit, need))
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}
