package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

// A server's error bodies as vLLM and OpenAI send them.
const (
	vllmContextLength = `{"object":"error","message":"This model's maximum context length is 1024 tokens. However, you requested 3013 tokens (2989 in the messages, 24 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`
	// vllmContextLengthDetail is the error object vLLM sends inside a 200
	// stream whose prompt is too long.
	vllmContextLengthMessage = "This model's maximum context length is 1024 tokens. However, you requested 3013 tokens (2989 in the messages, 24 in the completion). Please reduce the length of the messages or completion."
	vllmContextLengthDetail  = `{"message":"` + vllmContextLengthMessage + `","type":"BadRequestError","param":null,"code":400}`
	vllmNoModel              = `{"object":"error","message":"The model ` + "`gpt-x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`
	// hostileSecret is a static header value the 401 server echoes back.
	hostileSecret   = "azure-key-hostile-0123456789"
	openAIBadKey    = `{"error":{"message":"Incorrect API key provided: ` + hostileSecret + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openAIRateLimit = `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
)

// inStreamError is a data event carrying detail as its error object.
func inStreamError(detail string) string { return `data: {"error":` + detail + "}\n\n" }

// serve starts an httptest server for h and returns its URL.
func serve(h http.Handler) func(*testing.T) string {
	return func(t *testing.T) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
}

// withRetryAfter is status with a Retry-After header.
func withRetryAfter(code int, retryAfter, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", retryAfter)
		status(code, contentType, body)(w, r)
	}
}

// refused returns the URL of a port nobody listens on.
func refused(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// untrustedTLS starts a TLS server, offering HTTP/2 as well, whose
// certificate the client does not trust.
func untrustedTLS(t *testing.T) string {
	srv := httptest.NewUnstartedServer(writeEvents(chunk("a", "stop"), doneEvent))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// silent accepts connections and reads requests but never answers.
func silent(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// headersOnly sends a 200 event-stream head and then nothing.
func headersOnly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// overLongLine sends one SSE data line a little over the default 1 MiB
// limit.
func overLongLine(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, chunk("a", "")+"data: ")
	_, _ = w.Write([]byte(strings.Repeat("x", DefaultMaxLineBytes+1)))
	fmt.Fprint(w, "\n\n")
}

// h2c starts a server that speaks HTTP/1.1 and cleartext HTTP/2.
func h2c(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	return srv
}

// goAway streams one chunk over HTTP/2, then shuts the server down
// gracefully (which sends GOAWAY) and, as the stream does not end, closes
// the connection under it.
func goAway(t *testing.T) string {
	sent := make(chan struct{})
	var once sync.Once
	srv := h2c(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, roleChunk(), chunk("a", ""))
		w.(http.Flusher).Flush()
		once.Do(func() { close(sent) })
		<-r.Context().Done()
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sent:
		case <-t.Context().Done():
			return
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_ = srv.Config.Shutdown(ctx) // GOAWAY, then waits for the stream in vain
		_ = srv.Config.Close()
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return srv.URL
}

func useHTTP2(c *Config) { c.HTTP2 = true }

// TestHostileServers runs the client against servers that fail in every way
// we know of, on loopback, and checks that each failure gets the class that
// tells the user what to do, that the error shows the reason (the server's
// own when it gave one, in Result.ServerMessage too) and, for 429, the
// Retry-After.
func TestHostileServers(t *testing.T) {
	tests := []struct {
		name       string
		server     func(*testing.T) string // returns the base URL
		cfg        func(*Config)
		class      Class
		msg        string // substring of Err's text
		serverMsg  string // substring of ServerMessage; "" wants it empty
		retryAfter string
		is         error // errors.Is target, when set
	}{
		{name: "connection refused", server: refused, class: ClassConnect, msg: "refused"},
		{name: "dns failure", server: func(*testing.T) string { return "http://no-such-host.fleetbench.invalid:8000" },
			class: ClassConnect, msg: "no-such-host.fleetbench.invalid"},
		{name: "untrusted certificate", server: untrustedTLS, class: ClassTLS, msg: "x509: certificate signed by unknown authority"},
		{name: "untrusted certificate http2", server: untrustedTLS, cfg: useHTTP2, class: ClassTLS, msg: "x509: certificate signed by unknown authority"},
		{name: "400 vllm context length", server: serve(status(400, "application/json", vllmContextLength)),
			class: ClassBadRequest, msg: "http status 400: This model's maximum context length is 1024 tokens. However, you requested 3013 tokens",
			serverMsg: "maximum context length is 1024 tokens. However, you requested 3013 tokens"},
		{name: "401 openai key echoed", server: serve(status(401, "application/json", openAIBadKey)),
			cfg:   func(c *Config) { c.Headers = map[string]string{"Api-Key": hostileSecret} },
			class: ClassAuth, msg: "Incorrect API key provided: [redacted].", serverMsg: "Incorrect API key provided: [redacted]."},
		{name: "403 plain text", server: serve(status(403, "text/plain", "Forbidden: key lacks scope\n")),
			class: ClassAuth, msg: "key lacks scope", serverMsg: "Forbidden: key lacks scope"},
		{name: "404 model not found", server: serve(status(404, "application/json", vllmNoModel)),
			class: ClassNotFound, msg: "does not exist", serverMsg: "The model `gpt-x` does not exist."},
		{name: "408", server: serve(status(408, "text/plain", "request timeout")), class: ClassTimeout, msg: "http status 408", serverMsg: "request timeout"},
		{name: "429 retry after", server: serve(withRetryAfter(429, "7", "application/json", openAIRateLimit)),
			class: ClassRateLimited, msg: "Rate limit reached for requests (retry after 7)", serverMsg: "Rate limit reached", retryAfter: "7"},
		{name: "429 retry after http2", server: func(t *testing.T) string {
			srv := h2c(withRetryAfter(429, "Wed, 21 Oct 2015 07:28:00 GMT", "application/json", openAIRateLimit))
			t.Cleanup(srv.Close)
			return srv.URL
		}, cfg: useHTTP2, class: ClassRateLimited, msg: "retry after Wed, 21 Oct 2015 07:28:00 GMT", serverMsg: "Rate limit reached", retryAfter: "Wed, 21 Oct 2015 07:28:00 GMT"},
		{name: "500 plain", server: serve(status(500, "text/plain", "Internal Server Error\n")),
			class: ClassHTTP5xx, msg: "http status 500: Internal Server Error", serverMsg: "Internal Server Error"},
		{name: "504 gateway", server: serve(status(504, "text/html", "<h1>upstream timed out</h1>")), class: ClassTimeout, msg: "http status 504", serverMsg: "upstream timed out"},
		{name: "418 other 4xx", server: serve(status(418, "text/plain", "short and stout")), class: ClassHTTP4xx, msg: "short and stout", serverMsg: "short and stout"},
		{name: "cut mid-stream", server: serve(http.HandlerFunc(hijackReset)), class: ClassStreamCut, msg: "stream ended before [DONE]", is: ErrTruncated},
		{name: "no done", server: serve(writeEvents(roleChunk(), chunk("a", ""))), class: ClassStreamCut, is: ErrTruncated, msg: "stream ended before [DONE]"},
		{name: "invalid json chunk", server: serve(writeEvents(chunk("a", ""), "data: {\"choices\": [{\"delta\": nope}]}\n\n")), class: ClassProtocol, msg: "decode chunk"},
		{name: "one megabyte line", server: serve(http.HandlerFunc(overLongLine)), class: ClassProtocol, is: sse.ErrLineTooLong, msg: "line"},
		// A 200 stream carrying an error object is classed by the object's
		// code as a response of that status would be, and keeps the
		// server's whole message.
		{name: "in-stream 400 context length", server: serve(writeEvents(inStreamError(vllmContextLengthDetail))),
			class: ClassBadRequest, msg: "(BadRequestError, code 400)", serverMsg: vllmContextLengthMessage},
		{name: "in-stream 400 old vllm layout", server: serve(writeEvents(roleChunk(), "data: "+vllmContextLength+"\n\n")),
			class: ClassBadRequest, msg: "code 400", serverMsg: vllmContextLengthMessage},
		{name: "in-stream 401 string code", server: serve(writeEvents(inStreamError(`{"message":"key revoked mid-stream","type":"AuthenticationError","code":"401"}`))),
			class: ClassAuth, msg: "key revoked mid-stream", serverMsg: "key revoked mid-stream"},
		{name: "in-stream 404", server: serve(writeEvents(roleChunk(), "data: "+vllmNoModel+"\n\n")),
			class: ClassNotFound, msg: "does not exist", serverMsg: "The model `gpt-x` does not exist."},
		{name: "in-stream 429 openai named code", server: serve(writeEvents(chunk("a", ""), "data: "+openAIRateLimit+"\n\n")),
			class: ClassRateLimited, msg: "rate_limit_exceeded", serverMsg: "Rate limit reached for requests"},
		{name: "in-stream type only", server: serve(writeEvents(inStreamError(`{"message":"slow down","type":"RateLimitError"}`))),
			class: ClassRateLimited, msg: "slow down", serverMsg: "slow down"},
		{name: "in-stream 500", server: serve(writeEvents(chunk("a", ""), inStreamError(`{"message":"engine died","type":"InternalServerError","code":500}`))),
			class: ClassHTTP5xx, msg: "engine died", serverMsg: "engine died"},
		{name: "in-stream 503", server: serve(writeEvents(inStreamError(`{"message":"draining","code":503}`))),
			class: ClassHTTP5xx, msg: "draining", serverMsg: "draining"},
		{name: "in-stream no code", server: serve(writeEvents(chunk("a", ""), inStreamError(`{"message":"engine died"}`))),
			class: ClassProtocol, msg: "engine died", serverMsg: "engine died"},
		{name: "in-stream code not a status", server: serve(writeEvents(inStreamError(`{"message":"odd","type":"Weird","code":7}`))),
			class: ClassProtocol, msg: "odd", serverMsg: "odd"},
		{name: "in-stream error event", server: serve(writeEvents(chunk("a", ""), "event: error\ndata: backend gone\n\n")),
			class: ClassProtocol, msg: "backend gone", serverMsg: "backend gone"},
		{name: "malformed response head", server: serve(rawResponse("HTTP/1.1 two hundred OK\r\n\r\n")), class: ClassProtocol, is: errMalformedResponse, msg: "malformed"},
		{name: "accepts never answers", server: silent, cfg: func(c *Config) { c.FirstTokenTimeout = 200 * time.Millisecond },
			class: ClassTimeout, is: ErrFirstTokenTimeout, msg: "first token timeout"},
		{name: "headers then nothing", server: serve(http.HandlerFunc(headersOnly)), cfg: func(c *Config) { c.FirstTokenTimeout = 200 * time.Millisecond },
			class: ClassTimeout, is: ErrFirstTokenTimeout, msg: "first token timeout"},
		{name: "headers then nothing http2", server: func(t *testing.T) string {
			srv := h2c(http.HandlerFunc(headersOnly))
			t.Cleanup(srv.Close)
			return srv.URL
		}, cfg: func(c *Config) { c.HTTP2, c.RequestTimeout = true, 200*time.Millisecond },
			class: ClassTimeout, is: ErrRequestTimeout, msg: "request timeout"},
		{name: "http2 goaway mid-stream", server: goAway, cfg: useHTTP2, class: ClassStreamCut, is: ErrTruncated, msg: "GOAWAY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := newConfig(tt.server(t))
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			res := mustNew(t, cfg).Stream(t.Context(), userRequest("hi"))
			t.Logf("class %q err: %v", res.Class, res.Err)
			if res.Class != tt.class || res.Err == nil {
				t.Fatalf("class %q err %v, want class %q", res.Class, res.Err, tt.class)
			}
			if !strings.Contains(res.Err.Error(), tt.msg) {
				t.Errorf("err %q, want it to contain %q", res.Err, tt.msg)
			}
			if tt.is != nil && !errors.Is(res.Err, tt.is) {
				t.Errorf("err %v, want errors.Is %v", res.Err, tt.is)
			}
			if tt.serverMsg == "" && res.ServerMessage != "" {
				t.Errorf("ServerMessage %q, want none", res.ServerMessage)
			}
			if !strings.Contains(res.ServerMessage, tt.serverMsg) {
				t.Errorf("ServerMessage %q, want it to contain %q", res.ServerMessage, tt.serverMsg)
			}
			if res.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter %q, want %q", res.RetryAfter, tt.retryAfter)
			}
			if strings.Contains(res.Err.Error()+res.ServerMessage, hostileSecret) {
				t.Errorf("secret leaked: err %q, server message %q", res.Err, res.ServerMessage)
			}
		})
	}
}
