package servermetrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrNotMetrics is returned for a response whose Content-Type is not a
// Prometheus exposition format (an HTML login page, a JSON error, ...).
var ErrNotMetrics = errors.New("not a metrics page")

// ErrTooLarge is returned when a page is longer than the configured cap.
var ErrTooLarge = errors.New("metrics page too large")

// format is how a page is encoded, chosen from its Content-Type.
type format int

const (
	formatText        format = iota // text/plain; version=0.0.4 (or 1.0.0)
	formatOpenMetrics               // application/openmetrics-text; version=1.0.0 or 0.0.1
)

// formatOf picks the parser for a Content-Type header value. An empty
// value is read as the text format: some exporters send none.
func formatOf(contentType string) (format, error) {
	if strings.TrimSpace(contentType) == "" {
		return formatText, nil
	}
	mediatype, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, fmt.Errorf("content type %q: %w", contentType, ErrNotMetrics)
	}
	switch mediatype {
	case "text/plain":
		return formatText, nil
	case expfmt.OpenMetricsType:
		if v := params["version"]; v == expfmt.OpenMetricsVersion_2_0_0 {
			return 0, fmt.Errorf("content type %q: OpenMetrics 2.0 is not supported: %w", contentType, ErrNotMetrics)
		}
		return formatOpenMetrics, nil
	}
	return 0, fmt.Errorf("content type %q: %w", mediatype, ErrNotMetrics)
}

// Parse reads one /metrics page in the text format or OpenMetrics 1.0,
// chosen by contentType, with prometheus/common's expfmt text parser, and
// keeps the catalogued names. Metric names are validated as UTF-8 names, so
// vLLM's and SGLang's colons are accepted. It is safe to call concurrently.
func Parse(r io.Reader, contentType string) (*Page, error) {
	f, err := formatOf(contentType)
	if err != nil {
		return nil, err
	}
	if f == formatOpenMetrics {
		// expfmt has no OpenMetrics parser (its decoder says so); its text
		// parser reads OpenMetrics 1.0 once the few things only
		// OpenMetrics has are taken out. See openMetricsToText.
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("read metrics: %w", err)
		}
		r = bytes.NewReader(openMetricsToText(b))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return newPage(fams), nil
}

// openMetricsToText rewrites an OpenMetrics 1.0 page into the text format
// line by line: sample lines keep name, labels and value but lose their
// timestamp (OpenMetrics writes seconds with a fraction, the text format
// integer milliseconds) and exemplar ("# {...} v"); "# TYPE" lines of the
// types the text format lacks (info, stateset, unknown) become untyped;
// "# EOF" and "# UNIT" are comments to the text parser and stay.
func openMetricsToText(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b))
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), len(b)+1)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("# TYPE ")):
			fields := strings.Fields(string(line))
			if len(fields) == 4 {
				switch fields[3] {
				case "info", "stateset", "unknown":
					fields[3] = "untyped"
				}
				out.WriteString(strings.Join(fields, " "))
			} else {
				out.Write(line)
			}
		case len(line) == 0 || line[0] == '#':
			out.Write(line)
		default:
			out.Write(sampleWithoutTail(line))
		}
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// sampleWithoutTail returns "name{labels} value" of a sample line, dropping
// whatever follows the value. Label values may hold spaces, '#' and escaped
// quotes, so the end of the label set is found by scanning quotes.
func sampleWithoutTail(line []byte) []byte {
	i := 0
	inQuote, escaped := false, false
	// Past the name and the label set, if any.
	for ; i < len(line); i++ {
		c := line[i]
		if inQuote {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inQuote = false
			}
			continue
		}
		if c == '"' {
			inQuote = true
			continue
		}
		if c == ' ' || c == '\t' {
			break
		}
	}
	// Then the blanks and the value.
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	for i < len(line) && line[i] != ' ' && line[i] != '\t' {
		i++
	}
	return line[:i]
}

// capReader reads at most n bytes from r and fails with ErrTooLarge when
// there are more, so an endless or enormous page is cut off instead of
// filling memory.
type capReader struct {
	r io.Reader
	n int64 // bytes left before the cap
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		// One more byte tells a page of exactly the cap from a longer one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}
