package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// FuzzAppendString checks the hand-rolled string encoder against
// encoding/json with SetEscapeHTML(false), byte for byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `quote " backslash \ slash /`, "ctl \x00\x01\x1f\x7f \b\f\n\r\t",
		"<html> & co", "café 日本 😀", "bad \xff\xfe utf-8 \xe2\x82", "js \u2028 \u2029", "\ufffd",
		"a long plain run, then \"quoted\" text\nwith a\\backslash and é and \x1f at odd offsets 0123456789"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("appendString(%q) = %s, encoding/json %s", s, got, want.Bytes())
		}
	})
}

// TestBodyMatchesEncodingJSON checks built bodies against what
// encoding/json makes of the same request, for both endpoints.
func TestBodyMatchesEncodingJSON(t *testing.T) {
	msgs := []openai.Message{
		{Role: openai.RoleSystem, Content: "a <doc> & \"quotes\"\nline \u2028 \xff"},
		{Role: openai.RoleUser, Content: "q1"},
		{Role: openai.RoleAssistant, Content: "a1 😀"},
		{Role: openai.RoleUser, Content: "q2\t"},
	}
	tests := []struct {
		name     string
		endpoint string
		req      Request
		key      string
		want     any
	}{
		{"chat messages", EndpointChat, Request{Messages: msgs, MaxTokens: 7}, "messages", msgs},
		{"chat prompt", EndpointChat, Request{Prompt: "hi \"there\""}, "messages", []openai.Message{{Role: openai.RoleUser, Content: "hi \"there\""}}},
		{"chat empty", EndpointChat, Request{}, "messages", []openai.Message{{Role: openai.RoleUser}}},
		{"completions prompt", EndpointCompletions, Request{Prompt: "p\n<x>", Messages: msgs}, "prompt", "p\n<x>"},
		{"completions messages", EndpointCompletions, Request{Messages: msgs}, "prompt",
			strings.Join([]string{msgs[0].Content, msgs[1].Content, msgs[2].Content, msgs[3].Content}, "\n\n")},
		{"completions empty", EndpointCompletions, Request{}, "prompt", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := newConfig("http://localhost")
			cfg.Endpoint = tt.endpoint
			tmpl, err := newBodyTemplate(cfg.withDefaults())
			if err != nil {
				t.Fatal(err)
			}
			got := tmpl.build(nil, &tt.req)
			var body map[string]json.RawMessage
			if err := json.Unmarshal(got, &body); err != nil {
				t.Fatalf("body %s: %v", got, err)
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(tt.want); err != nil {
				t.Fatal(err)
			}
			if g, w := string(body[tt.key]), strings.TrimSpace(want.String()); g != w {
				t.Errorf("%s = %s, want %s", tt.key, g, w)
			}
			wantMax := "16"
			if tt.req.MaxTokens > 0 {
				wantMax = fmt.Sprint(tt.req.MaxTokens)
			}
			if string(body["max_tokens"]) != wantMax || string(body["stream"]) != "true" {
				t.Errorf("max_tokens %s stream %s", body["max_tokens"], body["stream"])
			}
		})
	}
}

// TestRequestBodyReleasedWhileStreaming checks that an in-flight stream
// does not hold its request body: the buffer goes back to the pool once the
// transport has written it, long before the stream ends, holding exactly
// the bytes the server received. The body is larger than the transport's
// 4 KB write buffer, so most of it is written straight from the buffer by
// tcpConn.ReadFrom.
func TestRequestBodyReleasedWhileStreaming(t *testing.T) {
	hold := make(chan struct{})
	received := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		received <- b
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, chunk("a", ""))
		w.(http.Flusher).Flush()
		<-hold
		fmt.Fprint(w, chunk("b", "stop")+doneEvent)
	}))
	defer srv.Close()
	defer close(hold)
	c := mustNew(t, newConfig(srv.URL))
	released := make(chan []byte, 4)
	c.bodies.released = func(b []byte) { released <- bytes.Clone(b) }

	doc := strings.Repeat("A paragraph of the reference document. ", 500) // 20 KB
	req := &Request{Messages: []openai.Message{{Role: openai.RoleSystem, Content: doc}, {Role: openai.RoleUser, Content: "q"}}}
	done := make(chan *Result, 1)
	go func() { done <- c.Stream(t.Context(), req) }()
	var body []byte
	select {
	case body = <-released:
	case res := <-done:
		t.Fatalf("stream ended (%v) before its body was released", res.Err)
	case <-time.After(10 * time.Second):
		t.Fatal("request body not released while the stream is in flight")
	}
	hold <- struct{}{}
	res := <-done
	if !res.OK() || res.Text != "ab" {
		t.Fatalf("stream: class %q err %v text %q", res.Class, res.Err, res.Text)
	}
	if got := <-received; !bytes.Equal(body, got) || len(body) < len(doc) {
		t.Errorf("released buffer (%d bytes) differs from the body received (%d bytes)", len(body), len(got))
	}
	select {
	case b := <-released:
		t.Errorf("a second buffer (%d bytes) was released for one request", len(b))
	default:
	}
}

// TestTCPConnReadFrom checks the direct body write against a loopback
// connection: exactly the limited bytes arrive, and the buffer is given
// back when the body is closed after a partial write.
func TestTCPConnReadFrom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(conn)
		conn.Close()
		got <- b
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn := tcpConn{raw.(*net.TCPConn)}
	var pool bodyPool
	var releases atomic.Int64
	pool.released = func([]byte) { releases.Add(1) }
	tmpl, err := newBodyTemplate(newConfig("http://x").withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	body := pool.newBody(tmpl, userRequest(strings.Repeat("x", 10000)))
	want := bytes.Clone((*body.buf)[:body.n-10])
	lr := &io.LimitedReader{R: body, N: int64(body.n - 10)}
	n, err := conn.ReadFrom(lr)
	if err != nil || n != int64(len(want)) || lr.N != 0 {
		t.Fatalf("ReadFrom = %d, %v (N left %d), want %d", n, err, lr.N, len(want))
	}
	if releases.Load() != 0 {
		t.Fatal("buffer released with 10 bytes unread")
	}
	body.Close()
	body.Close()
	if releases.Load() != 1 {
		t.Fatalf("%d releases after Close, want 1", releases.Load())
	}
	if _, err := body.Read(make([]byte, 1)); err == nil {
		t.Error("Read after Close succeeded")
	}
	conn.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("server got %d bytes, want %d", len(b), len(want))
	}
}

// TestRequestBodyConcurrentClose reads and closes bodies at once, as the
// transport may; run with -race.
func TestRequestBodyConcurrentClose(t *testing.T) {
	var pool bodyPool
	var releases atomic.Int64
	pool.released = func([]byte) { releases.Add(1) }
	tmpl, err := newBodyTemplate(newConfig("http://x").withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for range n {
		b := pool.newBody(tmpl, userRequest(strings.Repeat("y", 3000)))
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = io.Copy(io.Discard, b) })
		wg.Go(func() { _ = b.Close() })
		wg.Wait()
	}
	if got := releases.Load(); got != n {
		t.Errorf("%d releases for %d bodies", got, n)
	}
}

// TestMaxConnsPerHost checks that MaxConnsPerHost caps the connections many
// concurrent streams open, that the streams still all succeed (waiting for
// a connection), and that Warm does not ask for more than the cap. Without
// the cap the same streams open one connection each: there the server
// holds every response until all requests have arrived, so that none can
// reuse another's connection however the goroutines are scheduled.
func TestMaxConnsPerHost(t *testing.T) {
	const streams = 8
	for _, limit := range []int{0, 2} {
		t.Run(fmt.Sprintf("max=%d", limit), func(t *testing.T) {
			var opened, arrived atomic.Int64
			all := make(chan struct{})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/models" {
					fmt.Fprint(w, `{"object":"list","data":[]}`)
					return
				}
				if arrived.Add(1) == streams {
					close(all)
				}
				if limit == 0 {
					select {
					case <-all:
					case <-time.After(10 * time.Second):
					}
				} else {
					time.Sleep(20 * time.Millisecond)
				}
				writeEvents(chunk("a", "stop"), doneEvent)(w, r)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					opened.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			cfg := newConfig(srv.URL)
			cfg.MaxConnsPerHost = limit
			c := mustNew(t, cfg)

			start := make(chan struct{})
			done := make(chan *Result, streams)
			for range streams {
				go func() {
					<-start
					done <- c.Stream(t.Context(), userRequest("hi"))
				}()
			}
			close(start)
			for range streams {
				if res := <-done; !res.OK() {
					t.Errorf("stream: class %q err %v", res.Class, res.Err)
				}
			}
			want := int64(limit)
			if limit == 0 {
				want = streams
			}
			if got := opened.Load(); got != want {
				t.Errorf("%d streams opened %d connections, want %d", streams, got, want)
			}
			if limit > 0 {
				if err := c.Warm(t.Context(), streams); err != nil {
					t.Errorf("Warm(%d) with a cap of %d: %v", streams, limit, err)
				}
				if got := opened.Load(); got != want {
					t.Errorf("%d connections after Warm, want %d", got, want)
				}
			}
		})
	}
}

// BenchmarkBuildBody builds a document-chat body of about 14 KB.
func BenchmarkBuildBody(b *testing.B) {
	tmpl, err := newBodyTemplate(newConfig("http://x").withDefaults())
	if err != nil {
		b.Fatal(err)
	}
	doc := strings.Repeat("Paragraph 12 of the reference document describes the system in some detail. ", 160)
	req := &Request{Messages: []openai.Message{{Role: openai.RoleSystem, Content: doc}, {Role: openai.RoleUser, Content: "What does part 7 say?"}}}
	buf := tmpl.build(nil, req)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = tmpl.build(buf[:0], req)
	}
}
