package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
	"testing/iotest"
)

// readChunked decodes in with chunkedBody, reading through a 32-byte buffer
// one byte at a time when slow is set, so reads split everywhere.
func readChunked(in []byte, slow bool) ([]byte, error) {
	var src io.Reader = bytes.NewReader(in)
	if slow {
		src = iotest.OneByteReader(src)
	}
	var b chunkedBody
	b.reset(bufio.NewReaderSize(src, 32))
	return io.ReadAll(&b)
}

// chunkedCases are the chunked framings both decoders, chunkedBody and
// pushBody, are held to.
var chunkedCases = []struct {
	name, in, want string
	err            error // nil: success
}{
	{name: "two chunks", in: "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", want: "abcde"},
	{name: "bare lf", in: "3\nabc\n0\n\n", err: errMalformedChunk},
	{name: "bare lf after data", in: "3\r\nabc\n0\r\n\r\n", want: "abc", err: errMalformedChunk},
	{name: "extension and trailer", in: "3;x=y\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", want: "abc"},
	{name: "upper hex", in: "A\r\n0123456789\r\n0\r\n\r\n", want: "0123456789"},
	{name: "cut in data", in: "5\r\nab", want: "ab", err: io.ErrUnexpectedEOF},
	{name: "cut before trailers", in: "1\r\na\r\n0\r\n", want: "a", err: io.ErrUnexpectedEOF},
	{name: "bad size", in: "zz\r\nab\r\n", err: errMalformedChunk},
	{name: "missing crlf", in: "1\r\nab\r\n", want: "a", err: errMalformedChunk},
	{name: "size too long", in: "11111111111111111\r\n", err: errMalformedChunk},
}

func TestChunkedBody(t *testing.T) {
	for _, tt := range chunkedCases {
		for _, slow := range []bool{false, true} {
			got, err := readChunked([]byte(tt.in), slow)
			if string(got) != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("%s (slow %t): got %q, %v; want %q, %v", tt.name, slow, got, err, tt.want, tt.err)
			}
		}
	}
	long := "1" + strings.Repeat(" ", 40) + "\r\na\r\n0\r\n\r\n" // longer than the buffer
	if _, err := readChunked([]byte(long), false); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("a chunk line longer than the buffer: %v, want an error", err)
	}
}

// TestChunkedBodyReturnsEarly checks that a Read returns the chunk it has
// instead of blocking for the next one: a token must reach the parser when
// it arrives.
func TestChunkedBodyReturnsEarly(t *testing.T) {
	pr, pw := io.Pipe()
	var b chunkedBody
	b.reset(bufio.NewReader(pr))
	go func() { _, _ = pw.Write([]byte("3\r\nabc\r\n")) }()
	buf := make([]byte, 64)
	n, err := b.Read(buf)
	if err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("Read = %q, %v; want abc", buf[:n], err)
	}
	go func() { _, _ = pw.Write([]byte("2\r\nde\r\n0\r\n\r\n")) }()
	if rest, err := io.ReadAll(&b); err != nil || string(rest) != "de" {
		t.Fatalf("rest = %q, %v", rest, err)
	}
}

// FuzzChunkedBody checks chunkedBody against net/http's chunked reader:
// whatever chunkedBody accepts, net/http decodes to the same bytes, and
// whatever it returns before an error is a prefix of net/http's output.
func FuzzChunkedBody(f *testing.F) {
	for _, s := range []string{"3\r\nabc\r\n0\r\n\r\n", "1;a\r\nx\r\n0\r\nT: v\r\n\r\n", "a\nxxxxxxxxxx\n0\n\n", "0\r\n\r\n", "fffffffffffffffff\r\n"} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, slow bool) {
		got, err := readChunked(in, slow)
		want, werr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(in)))
		if err == nil && (werr != nil || !bytes.Equal(got, want)) {
			t.Fatalf("accepted %q as %q; net/http: %q, %v", in, got, want, werr)
		}
		if werr == nil && !bytes.HasPrefix(want, got) {
			t.Fatalf("decoded %q to %q, not a prefix of net/http's %q", in, got, want)
		}
	})
}
