package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

// Endpoints accepted in Config.Endpoint.
const (
	EndpointChat        = "chat"        // POST /v1/chat/completions
	EndpointCompletions = "completions" // POST /v1/completions
)

// Defaults applied by New to zero fields of Config.
const (
	DefaultWorkerHeader   = "X-Fleetbench-Worker"
	DefaultConnectTimeout = 10 * time.Second
	DefaultMaxLineBytes   = sse.DefaultMaxLine
)

// reservedBodyKeys are request fields the client owns: the measurement
// depends on them, so ExtraBody may not replace them.
var reservedBodyKeys = []string{"messages", "prompt", "stream"}

// DefaultAPIKeyEnv is the environment variable every command reads the
// API key from unless told otherwise: the OpenAI clients' own.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

// Config configures a Client. It is a plain value read from flags or files;
// Validate checks it and New applies defaults. A Config holds no API key:
// the key is named by APIKeyEnv and read once by New. Headers values and a
// password in BaseURL may still be credentials: String, GoString, Validate's
// errors and the Client built from it never show them, and the Client
// scrubs them from server text in errors. Config values are safe to copy
// and to share read-only between goroutines.
type Config struct {
	// BaseURL is the server, scheme://host[:port][/prefix]. The client
	// appends /v1/chat/completions or /v1/completions; a BaseURL that already
	// ends in /v1 gets only the rest.
	BaseURL string
	// Model is sent as the request's model.
	Model string
	// Endpoint is EndpointChat (the default when empty) or
	// EndpointCompletions.
	Endpoint string
	// APIKeyEnv names the environment variable that holds the API key, sent
	// as "Authorization: Bearer <key>". Empty, or a variable that is not
	// set, sends no key.
	APIKeyEnv string

	// MaxTokens is the default max_tokens; Request.MaxTokens overrides it.
	// Zero omits the field.
	MaxTokens int
	// MinTokens, IgnoreEOS, Temperature and Seed are sent when set. MinTokens
	// and IgnoreEOS are vLLM extensions that pin the output length.
	MinTokens   *int
	IgnoreEOS   bool
	Temperature *float64
	Seed        *int64
	// ExtraBody is a JSON object merged into every request body. Its keys
	// replace fields the client would send, except messages, prompt and
	// stream, which it may not contain.
	ExtraBody json.RawMessage

	// Headers are sent with every request; Request.Headers override them.
	// Values are never logged or printed.
	Headers map[string]string
	// WorkerHeader names the response header that identifies the serving
	// worker, tried before DefaultWorkerHeaders; "" tries those alone.
	WorkerHeader string
	// HTTP2 selects HTTP/2: over TLS by ALPN, and for http:// URLs
	// unencrypted HTTP/2 with prior knowledge (h2c). The default is
	// HTTP/1.1, one connection per in-flight stream.
	HTTP2 bool
	// MaxConnsPerHost caps the connections to the server, dialing and idle
	// ones included; a request that finds none free waits for one. Zero
	// means no cap. A load generator sets it to its concurrency: without
	// a cap, net/http dials for a request that finds no idle connection
	// even when one is about to come back, and at thousands of sessions
	// ends up with an extra connection per session.
	MaxConnsPerHost int

	// ConnectTimeout bounds dialing and the TLS handshake; default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// FirstTokenTimeout bounds the time from the send to the first content
	// chunk; zero means no limit.
	FirstTokenTimeout time.Duration
	// RequestTimeout bounds the whole request; zero means no limit.
	RequestTimeout time.Duration
	// MaxLineBytes bounds one SSE line and one event; default
	// DefaultMaxLineBytes.
	MaxLineBytes int
	// BlockingReads reads every HTTP/1.1 stream on its request's goroutine
	// with blocking reads. By default, on Linux, plain-HTTP streams are read
	// by the client's event loops (one per CPU), which handle each token as
	// its bytes are read instead of waking a goroutine for it; the field
	// exists to compare the two and as a way back.
	BlockingReads bool
}

// Validate reports every problem with c, joined, or nil. It does not read
// the environment; New does.
// CheckBaseURL reports a base URL that cannot be a target: not http(s),
// no host, or a query or fragment. The URL may hold a password or a key
// in its query: the error shows it redacted, and a parse error only its
// cause (url.Error quotes the URL).
func CheckBaseURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("parse base URL: %w", err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("base URL %q must be http:// or https:// with a host, e.g. http://localhost:8000", RedactURL(raw))
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("base URL %q must not have a query or fragment", RedactURL(raw)+"?...")
	}
	return nil
}

func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("client config: "+format, args...))
	}
	if err := CheckBaseURL(c.BaseURL); err != nil {
		add("%w", err)
	}
	if c.Model == "" {
		add("model is required")
	}
	switch c.Endpoint {
	case "", EndpointChat, EndpointCompletions:
	default:
		add("endpoint %q must be %q or %q", c.Endpoint, EndpointChat, EndpointCompletions)
	}
	if c.MaxTokens < 0 {
		add("max tokens %d is negative", c.MaxTokens)
	}
	if c.MinTokens != nil && *c.MinTokens < 0 {
		add("min tokens %d is negative", *c.MinTokens)
	}
	if c.Temperature != nil && *c.Temperature < 0 {
		add("temperature %g is negative", *c.Temperature)
	}
	if _, err := parseExtraBody(c.ExtraBody); err != nil {
		add("%w", err)
	}
	for k, v := range c.Headers {
		if !validHeaderName(k) {
			add("header name %q is invalid", k)
		}
		// The value may be a secret: say which header, never what it holds.
		if strings.ContainsAny(v, "\r\n\x00") {
			add("header %q has a control character in its value", k)
		}
	}
	if c.WorkerHeader != "" && !validHeaderName(c.WorkerHeader) {
		add("worker header %q is invalid", c.WorkerHeader)
	}
	if c.ConnectTimeout < 0 || c.FirstTokenTimeout < 0 || c.RequestTimeout < 0 {
		add("timeouts must not be negative")
	}
	if c.MaxLineBytes < 0 {
		add("max line bytes %d is negative", c.MaxLineBytes)
	}
	if c.MaxConnsPerHost < 0 {
		add("max connections per host %d is negative", c.MaxConnsPerHost)
	}
	return errors.Join(errs...)
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Endpoint == "" {
		c.Endpoint = EndpointChat
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	return c
}

// String describes c for logs. Header values are left out because they may
// hold credentials; only their names are shown. BaseURL is shown without
// user info and query (see RedactURL).
func (c Config) String() string {
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	return fmt.Sprintf("client.Config{BaseURL:%q Model:%q Endpoint:%q APIKeyEnv:%q MaxTokens:%d HTTP2:%t MaxConnsPerHost:%d Headers:%v WorkerHeader:%q ConnectTimeout:%s FirstTokenTimeout:%s RequestTimeout:%s MaxLineBytes:%d ExtraBody:%d bytes}",
		RedactURL(c.BaseURL), c.Model, c.Endpoint, c.APIKeyEnv, c.MaxTokens, c.HTTP2, c.MaxConnsPerHost, names, c.WorkerHeader,
		c.ConnectTimeout, c.FirstTokenTimeout, c.RequestTimeout, c.MaxLineBytes, len(c.ExtraBody))
}

// GoString is String, so %#v does not print header values either.
func (c Config) GoString() string { return c.String() }

// parseExtraBody checks that raw is empty or a JSON object without reserved
// keys and returns its members.
func parseExtraBody(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("parse extra body (must be a JSON object): %w", err)
	}
	if m == nil {
		return nil, errors.New("parse extra body: must be a JSON object, not null")
	}
	for _, k := range reservedBodyKeys {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("parse extra body: key %q is set by the client", k)
		}
	}
	return m, nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
