package sse

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// result is everything a parse produces, comparable across runs.
type result struct {
	events []Event
	last   Event // the incomplete event returned with io.ErrUnexpectedEOF
	err    error
	retry  time.Duration
}

// collect parses all of rd and copies every event out of the Reader.
func collect(t testing.TB, rd io.Reader, maxLine int) result {
	t.Helper()
	r := NewReader(rd, maxLine)
	var res result
	for i := 0; ; i++ {
		ev, err := r.Next()
		checkBounds(t, r)
		if errors.Is(err, ErrWouldBlock) {
			continue // a stalling source: the Reader waits with it
		}
		if res.add(ev, err) {
			break
		}
		if i > 1<<20 {
			t.Fatal("too many events")
		}
	}
	res.retry = r.Retry()
	if _, err := r.Next(); !errors.Is(err, res.err) {
		t.Fatalf("second Next after error = %v, want sticky %v", err, res.err)
	}
	return res
}

// add records what Next returned (an error other than ErrWouldBlock ends
// the parse) and reports whether the parse ended.
func (res *result) add(ev Event, err error) bool {
	if err != nil {
		res.err = err
		if errors.Is(err, io.ErrUnexpectedEOF) {
			res.last = copyEvent(ev)
		}
		return true
	}
	res.events = append(res.events, copyEvent(ev))
	return false
}

func copyEvent(ev Event) Event {
	ev.Data = append([]byte{}, ev.Data...)
	return ev
}

// checkBounds asserts the memory bound: no buffer outgrows the limit (the
// read buffer may reach three bytes to hold a byte-order mark).
func checkBounds(t testing.TB, r *Reader) {
	t.Helper()
	if c := cap(r.buf); c > max(r.max+1, 3) {
		t.Fatalf("read buffer cap %d > limit %d", c, r.max+1)
	}
	if c := cap(r.data); c > r.max+1 {
		t.Fatalf("data buffer cap %d > limit %d", c, r.max+1)
	}
}

func sameResult(a, b result) bool {
	if len(a.events) != len(b.events) || !sameErr(a.err, b.err) || a.retry != b.retry || !sameEvent(a.last, b.last) {
		return false
	}
	for i := range a.events {
		if !sameEvent(a.events[i], b.events[i]) {
			return false
		}
	}
	return true
}

func sameEvent(a, b Event) bool {
	return a.Type == b.Type && a.ID == b.ID && bytes.Equal(a.Data, b.Data)
}

func sameErr(a, b error) bool {
	for _, e := range []error{io.EOF, io.ErrUnexpectedEOF, ErrLineTooLong, ErrEventTooLong} {
		if errors.Is(a, e) != errors.Is(b, e) {
			return false
		}
	}
	return (a == nil) == (b == nil)
}

func ev(typ, data, id string) Event { return Event{Type: typ, Data: []byte(data), ID: id} }

func TestReader(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		max   int
		want  []Event
		last  Event
		err   error
		retry time.Duration
	}{
		{name: "empty", in: "", err: io.EOF},
		{name: "one event LF", in: "data: hello\n\n", want: []Event{ev("", "hello", "")}, err: io.EOF},
		{name: "CRLF", in: "data: a\r\n\r\ndata: b\r\n\r\n", want: []Event{ev("", "a", ""), ev("", "b", "")}, err: io.EOF},
		{name: "CR only", in: "data: a\r\rdata: b\r\r", want: []Event{ev("", "a", ""), ev("", "b", "")}, err: io.EOF},
		{name: "mixed endings", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []Event{ev("", "a\nb\nc", "")}, err: io.EOF},
		{name: "no space after colon", in: "data:x\n\n", want: []Event{ev("", "x", "")}, err: io.EOF},
		{name: "only one space removed", in: "data:  x \n\n", want: []Event{ev("", " x ", "")}, err: io.EOF},
		{name: "multi-line data", in: "data: {\"a\":\ndata: 1}\n\n", want: []Event{ev("", "{\"a\":\n1}", "")}, err: io.EOF},
		{name: "empty data line", in: "data\n\n", want: []Event{ev("", "", "")}, err: io.EOF},
		{name: "two empty data lines", in: "data\ndata\n\n", want: []Event{ev("", "\n", "")}, err: io.EOF},
		{name: "comments ignored", in: ": ping\n:\ndata: x\n: mid\n\n: tail\n", want: []Event{ev("", "x", "")}, err: io.EOF},
		{name: "event type resets", in: "event: error\ndata: boom\n\ndata: ok\n\n", want: []Event{ev("error", "boom", ""), ev("", "ok", "")}, err: io.EOF},
		{name: "type without data is discarded", in: "event: x\n\ndata: y\n\n", want: []Event{ev("", "y", "")}, err: io.EOF},
		{name: "id persists", in: "id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", want: []Event{ev("", "a", "7"), ev("", "b", "7"), ev("", "c", "")}, err: io.EOF},
		{name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", want: []Event{ev("", "a", "1"), ev("", "b", "1")}, err: io.EOF},
		{name: "retry", in: "retry: 1500\ndata: a\n\nretry: 1x\n\n", want: []Event{ev("", "a", "")}, err: io.EOF, retry: 1500 * time.Millisecond},
		{name: "unknown field ignored", in: "foo: bar\ndata: a\n\n", want: []Event{ev("", "a", "")}, err: io.EOF},
		{name: "field name is whole line", in: "data\n\n", want: []Event{ev("", "", "")}, err: io.EOF},
		{name: "BOM stripped", in: "\xef\xbb\xbfdata: a\n\n", want: []Event{ev("", "a", "")}, err: io.EOF},
		{name: "lone BOM prefix is data", in: "\xef\xbb", err: io.ErrUnexpectedEOF},
		{name: "eof inside event", in: "data: a\n\ndata: b\n", want: []Event{ev("", "a", "")}, last: ev("", "b", ""), err: io.ErrUnexpectedEOF},
		{name: "eof inside line", in: "data: [DONE]", last: ev("", "[DONE]", ""), err: io.ErrUnexpectedEOF},
		{name: "eof after comment", in: "data: a\n\n: bye\n", want: []Event{ev("", "a", "")}, err: io.EOF},
		{name: "line at limit", in: "data:" + strings.Repeat("x", 11) + "\n\n", max: 16, want: []Event{ev("", strings.Repeat("x", 11), "")}, err: io.EOF},
		{name: "line over limit", in: "data: a\n\ndata:" + strings.Repeat("x", 12) + "\n\n", max: 16, want: []Event{ev("", "a", "")}, err: ErrLineTooLong},
		{name: "unterminated line over limit", in: "data:" + strings.Repeat("x", 12), max: 16, err: ErrLineTooLong},
		{name: "event over limit", in: "data: 12345\ndata: 12345\ndata: 12345\n\n", max: 16, err: ErrEventTooLong},
		{name: "event at limit", in: "data: 1234567\ndata: 12345678\n\n", max: 16, want: []Event{ev("", "1234567\n12345678", "")}, err: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := result{events: tt.want, last: tt.last, err: tt.err, retry: tt.retry}
			readers := map[string]io.Reader{
				"whole":    strings.NewReader(tt.in),
				"one byte": iotest.OneByteReader(strings.NewReader(tt.in)),
				"data+eof": iotest.DataErrReader(strings.NewReader(tt.in)),
				"half":     iotest.HalfReader(strings.NewReader(tt.in)),
			}
			for name, rd := range readers {
				got := collect(t, rd, tt.max)
				if !sameResult(got, want) {
					t.Errorf("%s: got %+v (err %v), want %+v (err %v)", name, got.events, got.err, want.events, want.err)
				}
			}
		})
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 0)
	if e, err := r.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("Next = %q, %v", e.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next error = %v, want %v", err, boom)
	}
}

func TestReaderNoProgress(t *testing.T) {
	r := NewReader(zeroReader{}, 0)
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("Next error = %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestReaderCRLFSplit checks a CR that ends one read and a LF that starts the
// next: the line is delivered at once and the LF is not a blank line.
func TestReaderCRLFSplit(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 0)
	go func() {
		_, _ = pw.Write([]byte("data: a\r\n\r"))
		_, _ = pw.Write([]byte("\ndata: b\r\n\r\n"))
		_ = pw.Close()
	}()
	var got []string
	for {
		e, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, string(e.Data))
	}
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("events = %q, want [a b]", got)
	}
}

func TestReaderReset(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: partial"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatalf("next: %v", err)
	}
	r.Reset(strings.NewReader("id: 3\ndata: b\n\n"))
	e, err := r.Next()
	if err != nil || string(e.Data) != "b" || e.ID != "3" {
		t.Fatalf("after Reset Next = %+v, %v", e, err)
	}
}

// lineSource produces one endless line without holding it in memory.
type lineSource struct{ n int }

func (s *lineSource) Read(p []byte) (int, error) {
	if s.n <= 0 {
		return 0, io.EOF
	}
	n := min(len(p), s.n)
	for i := range p[:n] {
		p[i] = 'x'
	}
	s.n -= n
	return n, nil
}

// TestReaderLongLineBoundedMemory feeds a 10 MB line and checks that the
// Reader fails without allocating anywhere near 10 MB.
func TestReaderLongLineBoundedMemory(t *testing.T) {
	src := io.MultiReader(strings.NewReader("data: ok\n\ndata: "), &lineSource{n: 10 << 20})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := NewReader(src, DefaultMaxLine)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("Next error = %v, want ErrLineTooLong", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*DefaultMaxLine {
		t.Fatalf("allocated %d bytes for a 10 MB line, want <= %d", alloc, 4*DefaultMaxLine)
	}
	if c := cap(r.buf); c > DefaultMaxLine+1 {
		t.Fatalf("buffer cap %d > limit", c)
	}
}

func TestReaderSmallStart(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\n"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatalf("next: %v", err)
	}
	if c := cap(r.buf); c > initialBuf {
		t.Fatalf("initial buffer %d bytes, want <= %d", c, initialBuf)
	}
}

// reference parses in into events the simple way: whole input, split into
// lines first. The fuzz test checks Reader against it.
func reference(in []byte, maxLine int) result {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	in = bytes.TrimPrefix(in, []byte("\xef\xbb\xbf"))
	var (
		res      result
		data     []byte
		typ, id  string
		pending  bool
		hasData  bool
		lastLine bool
	)
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		var line []byte
		if i < 0 {
			line, in, lastLine = in, nil, true
		} else {
			line = in[:i]
			if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
				in = in[i+2:]
			} else {
				in = in[i+1:]
			}
		}
		if len(line) > maxLine {
			res.err = ErrLineTooLong
			return res
		}
		if len(line) == 0 {
			if hasData {
				res.events = append(res.events, Event{Type: typ, Data: bytes.TrimSuffix(data, []byte("\n")), ID: id})
			}
			data, typ, pending, hasData = nil, "", false, false
			continue
		}
		if line[0] == ':' {
			if lastLine {
				pending = true
			}
			continue
		}
		pending = true
		name, value := string(line), ""
		if j := bytes.IndexByte(line, ':'); j >= 0 {
			name, value = string(line[:j]), strings.TrimPrefix(string(line[j+1:]), " ")
		}
		switch name {
		case "data":
			if len(data)+len(value) > maxLine {
				res.err = ErrEventTooLong
				return res
			}
			data = append(append(data, value...), '\n')
			hasData = true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		case "retry":
			if ms, ok := parseDigits([]byte(value)); ok {
				res.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if pending {
		res.err = io.ErrUnexpectedEOF
		res.last = Event{Type: typ, Data: bytes.TrimSuffix(data, []byte("\n")), ID: id}
	} else {
		res.err = io.EOF
	}
	return res
}

// chunkReader returns the input in chunks whose sizes come from sizes,
// sometimes together with io.EOF.
type chunkReader struct {
	in    []byte
	sizes []byte
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	size := 1
	if len(c.sizes) > 0 {
		size = int(c.sizes[c.i%len(c.sizes)])%17 + 1
		c.i++
	}
	n := copy(p[:min(len(p), size)], c.in)
	c.in = c.in[n:]
	if len(c.in) == 0 && size%2 == 0 {
		return n, io.EOF
	}
	return n, nil
}

// stallReader is a non-blocking source: before each read of r it has no
// input yet and says so with ErrWouldBlock, sometimes several times.
type stallReader struct {
	r      io.Reader
	stalls int
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.stalls++
	if s.stalls%3 != 0 {
		return 0, ErrWouldBlock
	}
	return s.r.Read(p)
}

// TestReaderWouldBlock: a source that stalls before every byte gives the
// events of the whole input, and ErrWouldBlock ends nothing.
func TestReaderWouldBlock(t *testing.T) {
	in := []byte("\xef\xbb\xbfdata: a\r\n\r\nevent: e\ndata: b\rdata: c\r\r: x\ndata: partial")
	want := collect(t, bytes.NewReader(in), 0)
	got := collect(t, &stallReader{r: iotest.OneByteReader(bytes.NewReader(in))}, 0)
	if !sameResult(got, want) || len(got.events) != 2 || !errors.Is(got.err, io.ErrUnexpectedEOF) {
		t.Fatalf("stalling source: got %+v last %+v err %v, want %+v last %+v err %v",
			got.events, got.last, got.err, want.events, want.last, want.err)
	}
	r := NewReader(&stallReader{r: bytes.NewReader([]byte("data: x\n\n"))}, 0)
	if _, err := r.Next(); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("first Next on a stalled source = %v, want ErrWouldBlock", err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("second Next = %v, want ErrWouldBlock again (not sticky, not an end)", err)
	}
	if ev, err := r.Next(); err != nil || string(ev.Data) != "x" {
		t.Fatalf("Next once input came = %q, %v; want \"x\"", ev.Data, err)
	}
}

func FuzzReader(f *testing.F) {
	seeds := []string{
		"data: hello\n\n",
		"data: a\r\n\r\ndata: b\r\rdata: c\n\n",
		": comment\nevent: error\nid: 1\nretry: 10\ndata: x\ndata: y\n\n",
		"\xef\xbb\xbfdata: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		"data: partial",
		"data:" + strings.Repeat("z", 40) + "\n\n",
		"data: 1\ndata: 2\ndata: 3\ndata: 4\n\n",
		"\r\n\r\r\n\n:\r",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i*7), []byte{byte(i), 3, 1})
	}
	f.Fuzz(func(t *testing.T, in []byte, maxLine uint8, sizes []byte) {
		limit := int(maxLine)%64 + 1
		if maxLine >= 200 {
			limit = 0 // the default limit
		}
		want := reference(in, limit)
		whole := collect(t, bytes.NewReader(in), limit)
		if !sameResult(whole, want) {
			t.Fatalf("whole input: got %+v err %v, reference %+v err %v", whole.events, whole.err, want.events, want.err)
		}
		chunked := collect(t, &chunkReader{in: in, sizes: sizes}, limit)
		if !sameResult(chunked, whole) {
			t.Fatalf("chunked input: got %+v err %v, whole %+v err %v", chunked.events, chunked.err, whole.events, whole.err)
		}
		oneByte := collect(t, iotest.OneByteReader(bytes.NewReader(in)), limit)
		if !sameResult(oneByte, whole) {
			t.Fatalf("one-byte input: got %+v err %v, whole %+v err %v", oneByte.events, oneByte.err, whole.events, whole.err)
		}
		stalled := collect(t, &stallReader{r: &chunkReader{in: in, sizes: sizes}}, limit)
		if !sameResult(stalled, whole) {
			t.Fatalf("stalling input: got %+v err %v, whole %+v err %v", stalled.events, stalled.err, whole.events, whole.err)
		}
		parsed := collectParsed(t, in, sizes, limit)
		if !sameResult(parsed, whole) {
			t.Fatalf("Parse first: got %+v last %+v err %v, whole %+v last %+v err %v", parsed.events, parsed.last, parsed.err, whole.events, whole.last, whole.err)
		}
	})
}

// heldSource is input the caller holds and hands to the Reader piece by
// piece, saying ErrWouldBlock in between, as the client's event loops do.
type heldSource struct {
	p   []byte
	eof bool
}

func (h *heldSource) Read(b []byte) (int, error) {
	if len(h.p) == 0 {
		if h.eof {
			return 0, io.EOF
		}
		return 0, ErrWouldBlock
	}
	n := copy(b, h.p)
	h.p = h.p[n:]
	return n, nil
}

// collectParsed parses in as the client's event loops do: whenever the
// Reader has taken all it was given, Parse is offered the rest first; when
// it declines, the next piece (sizes, cycled) goes to Next.
func collectParsed(t testing.TB, in, sizes []byte, maxLine int) result {
	t.Helper()
	src := &heldSource{}
	r := NewReader(src, maxLine)
	var res result
	for i := 0; ; i++ {
		if i > 1<<22 {
			t.Fatal("no progress")
		}
		if len(src.p) == 0 {
			if ev, n, ok := r.Parse(in); ok {
				if n <= 0 || n > len(in) {
					t.Fatalf("Parse took %d of %d bytes", n, len(in))
				}
				res.events = append(res.events, copyEvent(ev))
				in = in[n:]
				continue
			}
			if len(in) == 0 {
				src.eof = true
			} else {
				k := 1
				if len(sizes) > 0 {
					k = int(sizes[i%len(sizes)])%16 + 1
				}
				k = min(k, len(in))
				src.p, in = in[:k], in[k:]
			}
		}
		ev, err := r.Next()
		checkBounds(t, r)
		if errors.Is(err, ErrWouldBlock) {
			continue
		}
		if res.add(ev, err) {
			break
		}
	}
	res.retry = r.Retry()
	return res
}

// TestParseTakesDataEvents checks that Parse takes the events LLM servers
// send, the stream's first included, and declines what Next must see.
func TestParseTakesDataEvents(t *testing.T) {
	if _, _, ok := NewReader(nil, 0).Parse([]byte("\xef\xbb\xbfdata: x\n\n")); ok {
		t.Error("Parse took an event behind a byte-order mark")
	}
	r := NewReader(&heldSource{p: []byte("data: first\n\n")}, 0)
	if ev, n, ok := r.Parse([]byte("data: x\n\n")); !ok || string(ev.Data) != "x" || n != 9 {
		t.Errorf("Parse of the first bytes = %q, %d, %t", ev.Data, n, ok)
	}
	if ev, err := r.Next(); err != nil || string(ev.Data) != "first" {
		t.Fatalf("Next = %q, %v", ev.Data, err)
	}
	for _, tt := range []struct {
		in   string
		data string
		ok   bool
	}{
		{"data: {\"a\":1}\n\ndata: next", `{"a":1}`, true},
		{"data:[DONE]\n\n", "[DONE]", true},
		{"data: two\ndata: lines\n\n", "", false},
		{"data: crlf\r\n\r\n", "", false},
		{"event: error\ndata: x\n\n", "", false},
		{"data: cut\n", "", false},
		{": comment\n\n", "", false},
	} {
		ev, n, ok := r.Parse([]byte(tt.in))
		if ok != tt.ok || (ok && (string(ev.Data) != tt.data || n != strings.Index(tt.in, "\n\n")+2)) {
			t.Errorf("Parse(%q) = %q, %d, %t; want %q, %t", tt.in, ev.Data, n, ok, tt.data, tt.ok)
		}
	}
}

// stream is a typical vLLM chat stream: a role chunk, content chunks, a
// finish chunk, a usage chunk and [DONE].
func stream(tokens int) []byte {
	var b bytes.Buffer
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n")
	for range tokens {
		b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"finish_reason\":null}]}\n\n")
	}
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":256,\"total_tokens\":266}}\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkReader parses a 256-token chat stream; with a reused Reader it
// should not allocate per event.
func BenchmarkReader(b *testing.B) {
	in := stream(256)
	src := bytes.NewReader(in)
	r := NewReader(src, 0)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(in)
		r.Reset(src)
		for {
			if _, err := r.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
