package client

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// headSeeds are reply heads as streaming servers send them.
var headSeeds = []string{
	"HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\nContent-Type: text/event-stream\r\nDate: Wed, 25 Nov 2026 10:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\ndate: Wed, 25 Nov 2026 10:00:00 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive, Close\r\nTransfer-Encoding: Chunked\r\n\r\n",
	"HTTP/1.1 200\r\nX-Worker:  w-1 \t\r\nX-Worker: w-2\r\nX-Empty:\r\ntransfer-encoding:chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
}

// FuzzReadHeadFast checks the fast head reader against http.ReadResponse:
// whenever it accepts a head, net/http must accept it too and agree on every
// field the client reads and on where the body starts.
func FuzzReadHeadFast(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s + "5\r\ndata:\r\n0\r\n\r\n"))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		_, _ = br.Peek(1)
		buffered := br.Buffered()
		fast := readHeadFast(br) //nolint:bodyclose // the body is a bytes.Reader: nothing to close
		if fast == nil {
			if br.Buffered() != buffered {
				t.Fatalf("refused head consumed %d bytes", buffered-br.Buffered())
			}
			return
		}
		slowBR := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		slow, err := http.ReadResponse(slowBR, nil) //nolint:bodyclose // the body is a bytes.Reader: nothing to close
		if err != nil {
			t.Fatalf("fast path accepted a head net/http refuses (%v): %q", err, in)
		}
		got := []any{fast.Status, fast.StatusCode, fast.Proto, fast.ProtoMajor, fast.ProtoMinor, fast.Header, fast.Close, fast.TransferEncoding, fast.ContentLength, len(fast.Trailer)}
		want := []any{slow.Status, slow.StatusCode, slow.Proto, slow.ProtoMajor, slow.ProtoMinor, slow.Header, slow.Close, slow.TransferEncoding, slow.ContentLength, len(slow.Trailer)}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("head %q:\nfast %#v\nhttp %#v", in, got, want)
		}
		// A connection's storage, used for another head first, parses it
		// to the same response.
		var h respHead
		_, _ = h.parse([]byte(headSeeds[3])) //nolint:bodyclose // nothing to close
		again, n := h.parse(in)              //nolint:bodyclose // nothing to close
		if again == nil || n != buffered-br.Buffered() {
			t.Fatalf("head %q: reused storage took %d bytes, the fast path %d", in, n, buffered-br.Buffered())
		}
		if got2 := []any{again.Status, again.StatusCode, again.Proto, again.ProtoMajor, again.ProtoMinor, again.Header, again.Close, again.TransferEncoding, again.ContentLength, len(again.Trailer)}; !reflect.DeepEqual(got2, want) {
			t.Fatalf("head %q after another:\nreused %#v\nhttp   %#v", in, got2, want)
		}
		restFast, _ := io.ReadAll(br)
		restSlow, _ := io.ReadAll(slowBR)
		if !bytes.Equal(restFast, restSlow) {
			t.Fatalf("head %q: body starts at %q, net/http's at %q", in, restFast, restSlow)
		}
	})
}

// TestReadHeadFastTakesTheUsualHeads checks that the heads of the usual
// servers take the fast path (the fuzz test checks they are right).
func TestReadHeadFastTakesTheUsualHeads(t *testing.T) {
	for _, s := range headSeeds[:4] {
		br := bufio.NewReader(strings.NewReader(s + "0\r\n\r\n"))
		_, _ = br.Peek(1)
		if readHeadFast(br) == nil { //nolint:bodyclose // the body is a strings.Reader: nothing to close
			t.Errorf("head %q took the slow path", s)
		}
	}
}

func BenchmarkReadHead(b *testing.B) {
	in := []byte(headSeeds[0])
	for _, tt := range []struct {
		name string
		read func(*bufio.Reader) (*http.Response, error)
	}{
		{"fast", readResponse},
		{"reused", func() func(*bufio.Reader) (*http.Response, error) {
			var h respHead // an event loop's connection's
			return func(br *bufio.Reader) (*http.Response, error) {
				buf, _ := br.Peek(len(in))
				resp, _ := h.parse(buf) //nolint:bodyclose // nothing to close
				return resp, nil
			}
		}()}, //nolint:bodyclose // the body is http.NoBody
		{"net-http", func(br *bufio.Reader) (*http.Response, error) { return http.ReadResponse(br, nil) }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			src := bytes.NewReader(in)
			br := bufio.NewReader(src)
			for b.Loop() {
				src.Reset(in)
				br.Reset(src)
				if _, err := tt.read(br); err != nil { //nolint:bodyclose // the body is a bytes.Reader: nothing to close
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzIsJSON checks isJSON's shortcut against mime.ParseMediaType on every
// value: the two agree whether or not the value mentions json.
func FuzzIsJSON(f *testing.F) {
	for _, ct := range []string{"text/event-stream", "text/event-stream; charset=utf-8", "application/json",
		"Application/JSON; charset=utf-8", "application/jsonl", "application/x-ndjson", "", ";", "application/json ;q=1",
		"APPLICATION/JSON", "application/problem+json", "text/plain; note=json"} {
		f.Add(ct)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		mt, _, _ := mime.ParseMediaType(ct)
		if want := mt == "application/json"; isJSON(ct) != want {
			t.Errorf("isJSON(%q) = %v, ParseMediaType says %q", ct, !want, mt)
		}
	})
}
