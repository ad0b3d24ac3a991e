package servermetrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// acceptHeader asks for the text format. Python's prometheus_client (vLLM,
// SGLang) answers OpenMetrics whenever the Accept header mentions it, and
// the text format is the one expfmt parses natively, so it is not asked for;
// a server that sends OpenMetrics anyway is still read.
const acceptHeader = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// StatusError is returned for a /metrics response that is not 200 OK.
type StatusError struct {
	Code   int
	Status string
}

func (e *StatusError) Error() string { return "status " + e.Status }

// Fetcher reads /metrics pages over HTTP. It is safe for concurrent use.
type Fetcher struct {
	client   *http.Client
	maxBytes int64
}

// NewFetcher returns a Fetcher that reads pages of at most maxBytes through
// client (nil: a client of its own that keeps connections alive between
// scrapes). Each Fetch is bounded by its ctx.
func NewFetcher(client *http.Client, maxBytes int64) *Fetcher {
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 2
		client = &http.Client{Transport: tr}
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Fetcher{client: client, maxBytes: maxBytes}
}

// Fetch reads and parses the page at url. It fails, with a one-line error,
// on a transport error or timeout, a status other than 200, a Content-Type
// that is not a metrics format (ErrNotMetrics), a body over the cap
// (ErrTooLarge, read no further) or a page that does not parse.
func (f *Fetcher) Fetch(ctx context.Context, url string) (*Page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch metrics: %w", err)
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch metrics: %w", err)
	}
	defer func() {
		// Drain a little so the connection can be reused; a body over that
		// is dropped with its connection.
		_, _ = io.CopyN(io.Discard, resp.Body, 4096)
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch metrics: %w", &StatusError{Code: resp.StatusCode, Status: resp.Status})
	}
	page, err := Parse(&capReader{r: resp.Body, n: f.maxBytes}, resp.Header.Get("Content-Type"))
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("fetch metrics: over %d bytes: %w", f.maxBytes, ErrTooLarge)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch metrics: %w", err)
	}
	return page, nil
}
