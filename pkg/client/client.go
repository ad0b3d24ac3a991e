package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/sse"
	"github.com/hashicorp/go-hclog"
)

// Transport tuning. Go's default keeps only two idle connections per host,
// which under a load test means a new dial for almost every request; a load
// generator wants every connection it opened kept.
const (
	maxIdleConnsPerHost = 1 << 16
	idleConnTimeout     = 90 * time.Second
	tcpKeepAlive        = 30 * time.Second
	// readBufferSize and writeBufferSize size each HTTP/1.1 connection's
	// buffers (net/http's default is 4 KB each), which live as long as the
	// connection: with one connection per stream they are a good part of a
	// stream's memory. A streamed chunk is a few hundred bytes; a request
	// body larger than the write buffer is written straight from its own
	// buffer (see tcpConn), so a small one costs no extra system call.
	readBufferSize  = 2 << 10
	writeBufferSize = 1 << 10
	// errorBodyLimit bounds what is read of a non-200 body for the message.
	errorBodyLimit = 4 << 10
	// discardLimit bounds what is read past the message so that the
	// connection can be reused.
	discardLimit = 64 << 10
	// drainTimeout bounds the wait for the end of the body after [DONE].
	// Servers send the chunked terminator with or right after [DONE];
	// reading it lets the connection be reused. The bound is generous
	// because on a saturated machine a goroutine may wait tens of
	// milliseconds to run, and giving up closes the connection and costs
	// the next turn a dial; only a server that holds the body open after
	// [DONE] ever waits it out.
	drainTimeout = time.Second
	// itlInitial caps the ITL slice allocated up front from max_tokens; it
	// grows on demand past that, so a large max_tokens with short answers
	// does not cost 8 bytes a token on every one of thousands of streams.
	itlInitial = 32
)

// Request is one turn to send. The chat endpoint uses Messages (or Prompt as
// a single user message when Messages is empty); the completions endpoint uses
// Prompt (or the messages' contents joined by blank lines). MaxTokens, when
// positive, overrides Config.MaxTokens. Headers are added to the request,
// after and over Config.Headers, e.g. X-Session-ID for session affinity.
//
// Stream only reads a Request, so one may be shared between goroutines as long
// as nobody mutates it while a Stream call is using it.
type Request struct {
	Messages  []openai.Message
	Prompt    string
	MaxTokens int
	Headers   map[string]string
}

// Client sends streaming requests and measures them. A Client is safe for
// concurrent use by any number of goroutines; create one per target and share
// it. Its String form never contains the API key or header values.
type Client struct {
	endpoint      string
	url           string
	shownURL      string // url for logs and String, password redacted
	modelsURL     string
	model         string
	http2         bool
	workerHeaders []string
	maxLine       int
	firstToken    time.Duration
	reqTimeout    time.Duration
	itlCap        int
	maxConns      int

	body   *bodyTemplate
	bodies bodyPool
	// creds holds every header value, the API key included. It is behind a
	// pointer so that fmt, printing a Client value, shows an address rather
	// than its contents.
	creds     *credentials
	http      *http.Client
	transport *http.Transport // HTTP/2, and GET requests
	h1        *h1Transport    // streams over HTTP/1.1; nil under HTTP/2
	logger    hclog.Logger
	states    sync.Pool // *streamState
}

// credentials are the static request headers and the secrets to scrub from
// any server text that ends up in an error.
type credentials struct {
	header http.Header
	key    string
	// secrets are the values redact scrubs: the API key, the URL's
	// password and every static header value long enough to be a
	// credential (a short one, like "1", would mangle innocent text).
	secrets []string
}

// minSecretLen is the shortest header value redact scrubs.
const minSecretLen = 8

// New validates cfg, reads the API key from the environment variable named by
// cfg.APIKeyEnv (once), builds the tuned transport and returns the Client. A
// nil logger discards logs.
func New(cfg Config, logger hclog.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	creds := &credentials{header: make(http.Header, len(cfg.Headers)+1)}
	// An unset variable means "no key": servers without authentication
	// (the simulator, a local vLLM) need none. One warning says which
	// variable to set should the server answer 401.
	key := os.Getenv(cfg.APIKeyEnv)
	if cfg.APIKeyEnv != "" && key == "" {
		logger.Warn("api key variable is not set; sending no key", "env", cfg.APIKeyEnv)
	}
	if key != "" {
		creds.key = key
		creds.header.Set("Authorization", "Bearer "+key)
		creds.secrets = append(creds.secrets, key)
	}
	for k, v := range cfg.Headers {
		creds.header.Set(k, v)
		if len(v) >= minSecretLen {
			creds.secrets = append(creds.secrets, v)
		}
	}
	body, err := newBodyTemplate(cfg)
	if err != nil {
		return nil, fmt.Errorf("build request template: %w", err)
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	path := "/chat/completions"
	if cfg.Endpoint == EndpointCompletions {
		path = "/completions"
	}
	u, err := url.Parse(base + path)
	if err != nil {
		return nil, fmt.Errorf("build url: %w", err)
	}
	if pass, ok := u.User.Password(); ok && pass != "" {
		creds.secrets = append(creds.secrets, pass)
	}
	tr := newTransport(cfg)
	c := &Client{
		endpoint:      cfg.Endpoint,
		url:           base + path,
		shownURL:      RedactURL(u.String()), // user info and query may hold credentials
		modelsURL:     base + "/models",
		model:         cfg.Model,
		http2:         cfg.HTTP2,
		workerHeaders: WorkerHeaders(cfg.WorkerHeader),
		maxLine:       cfg.MaxLineBytes,
		firstToken:    cfg.FirstTokenTimeout,
		reqTimeout:    cfg.RequestTimeout,
		itlCap:        min(cfg.MaxTokens, itlInitial),
		maxConns:      cfg.MaxConnsPerHost,
		body:          body,
		creds:         creds,
		transport:     tr,
		http: &http.Client{
			Transport: tr,
			// A redirect is a misconfigured target, and following it would
			// turn the POST into a GET: report the 3xx instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		logger: logger.Named("client"),
	}
	if !cfg.HTTP2 {
		c.h1 = newH1Transport(cfg, u, creds.header, cfg.MaxConnsPerHost)
	}
	c.states.New = func() any { return &streamState{rd: *sse.NewReader(nil, c.maxLine)} }
	c.logger.Debug("client ready", "url", c.shownURL, "model", c.model, "http2", c.http2,
		"event_loops", c.h1 != nil && c.h1.loops, "api_key_set", creds.key != "", "headers", len(cfg.Headers))
	return c, nil
}

// newTransport builds a transport for many concurrent streams to one host:
// every idle connection is kept, connections are capped at
// cfg.MaxConnsPerHost (0: no cap), responses are not compressed
// (compression would buffer the stream), and the protocol is HTTP/1.1
// unless cfg.HTTP2 asks for HTTP/2 (h2c for http:// URLs). TCP connections
// are wrapped in tcpConn, which writes request bodies without a copy buffer.
func newTransport(cfg Config) *http.Transport {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: tcpKeepAlive}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if tc, ok := conn.(*net.TCPConn); ok {
			return tcpConn{tc}, nil
		}
		return conn, err
	}
	var protocols http.Protocols
	if cfg.HTTP2 {
		protocols.SetHTTP2(true)
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
	}
	return &http.Transport{
		// No proxy: a proxy between the load generator and the server
		// would be measured as server latency.
		Proxy:               nil,
		DialContext:         dial,
		TLSHandshakeTimeout: cfg.ConnectTimeout,
		MaxIdleConns:        0, // no global limit
		MaxIdleConnsPerHost: maxIdleConnsPerHost,
		// With no cap, a request that finds no idle connection dials even
		// though one is about to come back (a closed loop's previous turn
		// finishing), which leaves an extra connection per session at
		// scale; capping at the concurrency makes it wait instead.
		MaxConnsPerHost:    cfg.MaxConnsPerHost,
		IdleConnTimeout:    idleConnTimeout,
		DisableCompression: true,
		ReadBufferSize:     readBufferSize,
		WriteBufferSize:    writeBufferSize,
		Protocols:          &protocols,
	}
}

// String describes the client without credentials. It is safe to call
// concurrently.
func (c *Client) String() string {
	return fmt.Sprintf("client.Client{url:%q model:%q http2:%t}", c.shownURL, c.model, c.http2)
}

// GoString is String, so %#v does not expose credentials either.
func (c *Client) GoString() string { return c.String() }

// Close closes idle connections. In-flight streams are not affected; the
// Client stays usable. It is safe to call concurrently.
func (c *Client) Close() {
	c.transport.CloseIdleConnections()
	if c.h1 != nil {
		c.h1.pool.closeIdle()
	}
}

// Warm opens up to n connections ahead of a run and leaves them idle for
// streams to use; an error means some could not be opened. n is capped at
// Config.MaxConnsPerHost when that is set. Over HTTP/1.1 it dials (and
// handshakes TLS); under HTTP/2, where streams share connections, it sends
// n concurrent GET /v1/models requests and holds every response until all
// have arrived, and any HTTP response counts as warmed. It is safe to call
// concurrently with Stream.
func (c *Client) Warm(ctx context.Context, n int) error {
	if c.h1 != nil {
		if err := c.h1.warm(ctx, n); err != nil {
			return err
		}
		c.logger.Debug("connections warmed", "count", n)
		return nil
	}
	if c.maxConns > 0 {
		n = min(n, c.maxConns)
	}
	if n <= 0 {
		return nil
	}
	var ready, done sync.WaitGroup
	ready.Add(n)
	release := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		done.Go(func() {
			resp, err := c.get(ctx, c.modelsURL)
			ready.Done()
			if err != nil {
				errs[i] = err
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, discardLimit))
			resp.Body.Close()
		})
	}
	ready.Wait()
	close(release)
	done.Wait()
	if err := warmError(errs); err != nil {
		return err
	}
	c.logger.Debug("connections warmed", "count", n)
	return nil
}

// warmError sums up Warm's failures: how many of the attempts failed, and
// the first error.
func warmError(errs []error) error {
	var failed int
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("warm connections: %d of %d failed: %w", failed, len(errs), first)
	}
	return nil
}

// get sends a GET with the client's headers.
func (c *Client) get(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range c.creds.header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("send request: %w", err)
	}
	return resp, nil
}

// newRequest builds the HTTP request for req on ctx. The body is built into
// a pooled buffer that goes back to the pool once the transport has written
// it. GetBody, which the transport calls to send the request again on a new
// connection when a reused one turned out dead before anything was written
// (or, under HTTP/2, on a refused stream), builds the body afresh: it only
// runs inside RoundTrip, while req is still the caller's.
func (c *Client) newRequest(ctx context.Context, req *Request) (*http.Request, error) {
	body := c.bodies.newBody(c.body, req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, body)
	if err != nil {
		_ = body.Close()
		return nil, fmt.Errorf("build request: %w", err)
	}
	hr.ContentLength = int64(body.n)
	hr.GetBody = func() (io.ReadCloser, error) { return c.bodies.newBody(c.body, req), nil }
	h := make(http.Header, len(c.creds.header)+len(req.Headers)+2)
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"text/event-stream"}
	for k, v := range c.creds.header {
		h[k] = v // shared read-only; the transport does not modify headers
	}
	for k, v := range req.Headers {
		h.Set(k, v)
	}
	hr.Header = h
	// http.Client turns user info in the URL into basic auth; Stream calls
	// the transport directly, so it does the same here.
	if u := hr.URL.User; u != nil && h.Get("Authorization") == "" {
		pass, _ := u.Password()
		hr.SetBasicAuth(u.Username(), pass)
	}
	return hr, nil
}

// redact removes the API key, the URL's password and static header values
// (see credentials.secrets) from server-provided text before it becomes
// part of an error: a server may echo a rejected credential back.
func (c *Client) redact(s string) string {
	for _, secret := range c.creds.secrets {
		if strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// classify picks the class of a failure. The caller's context wins (a run
// that ends cancels its requests), then the client's own timeouts, then a
// network timeout (dial, TLS handshake), then a TLS failure and a protocol
// violation; otherwise the stage's fallback class applies (connect before a
// response, stream_cut after). The returned error wraps the cause so
// errors.Is finds it.
func classify(ctx, rctx context.Context, err error, fallback Class) (Class, error) {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(err, cause) {
			err = fmt.Errorf("%w: %w", err, cause)
		}
		return ClassCancelled, err
	}
	if cause := context.Cause(rctx); errors.Is(cause, ErrFirstTokenTimeout) || errors.Is(cause, ErrRequestTimeout) {
		if !errors.Is(err, cause) {
			err = fmt.Errorf("%w: %w", err, cause)
		}
		return ClassTimeout, err
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return ClassTimeout, err
	case isTLSError(err):
		return ClassTLS, err
	case isProtocolError(err):
		return ClassProtocol, err
	}
	return fallback, err
}
