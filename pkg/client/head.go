package client

import (
	"bufio"
	"bytes"
	"mime"
	"net/http"
	"strings"
)

// isJSON reports whether the Content-Type value ct names application/json
// (whatever its case and parameters): a server that ignored "stream": true.
// A value without "json" in it cannot, and skips mime.ParseMediaType, which
// builds a map on every call: the usual text/event-stream costs a scan.
func isJSON(ct string) bool {
	if !strings.Contains(strings.ToLower(ct), "json") {
		return false
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "application/json"
}

// readHeadFast parses the head of the usual streamed reply without
// net/http: "HTTP/1.1 200 ...", simple header lines and
// "Transfer-Encoding: chunked", all already in br's buffer. It returns nil,
// consuming nothing, for anything else (another status or version, a
// Content-Length or Trailer header, a folded, bare-LF or unusual header
// line, a head not yet whole in the buffer), which http.ReadResponse then
// reads. What it returns equals what http.ReadResponse returns for the same
// bytes in every field the client reads (FuzzReadHeadFast), and it costs a
// fraction: net/http's head reading was about 5% of the client's CPU under
// load.
func readHeadFast(br *bufio.Reader) *http.Response {
	buf, _ := br.Peek(br.Buffered())
	resp, n := parseHeadFast(buf)
	if resp != nil {
		_, _ = br.Discard(n)
	}
	return resp
}

// parseHeadFast is readHeadFast on the bytes in buf: it returns the
// response and the length of its head, or nil.
func parseHeadFast(buf []byte) (*http.Response, int) {
	return new(respHead).parse(buf)
}

// respHead is a parsed head's response with the storage behind it. An
// event loop's connection parses each reply's head into the same one
// (nothing holds a response past its exchange), so that a head costs no
// allocation beyond its values that are not interned (internValue).
type respHead struct {
	resp http.Response
	vals []string // the header values, one backing array
	te   []string // resp.TransferEncoding
}

// parse is parseHeadFast into h: the response it returns is h's, valid
// until the next parse.
func (h *respHead) parse(buf []byte) (*http.Response, int) {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, 0
	}
	head := buf[:end+2] // every line with its CRLF
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	status, ok := bytes.CutPrefix(line, []byte("HTTP/1.1 200"))
	if !ok || (len(status) > 0 && status[0] != ' ') || !plainValue(status) {
		return nil, 0
	}
	st := "200 OK"
	if string(status) != " OK" {
		st = "200" + string(status)
	}
	// One backing array for the values of headers seen once (the usual
	// case), cut with their capacity so that an append copies.
	vals := h.vals[:0]
	if n := bytes.Count(rest, []byte("\r\n")); cap(vals) < n {
		vals = make([]string, 0, n)
	}
	hdr := h.resp.Header
	if hdr == nil {
		hdr = make(http.Header, 8)
	}
	clear(hdr)
	h.resp = http.Response{
		Status:     st,
		StatusCode: http.StatusOK,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     hdr,
	}
	chunked := false
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !plainValue(line) {
			return nil, 0
		}
		name, ok := canonicalName(line[:colon])
		if !ok {
			return nil, 0
		}
		value := bytes.Trim(line[colon+1:], " \t")
		switch name {
		case "Content-Length", "Trailer", "Pragma":
			// Length and trailers are net/http's to reconcile; Pragma can
			// add a Cache-Control header.
			return nil, 0
		case "Transfer-Encoding":
			if chunked || !bytes.EqualFold(value, []byte("chunked")) {
				return nil, 0
			}
			chunked = true
			continue // net/http moves it to TransferEncoding
		}
		if prev, ok := hdr[name]; ok {
			hdr[name] = append(prev, internValue(value))
			continue
		}
		vals = append(vals, internValue(value))
		hdr[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	h.vals = vals
	if !chunked {
		return nil, 0
	}
	if h.te == nil {
		h.te = []string{"chunked"}
	}
	resp := &h.resp
	resp.TransferEncoding = h.te
	resp.ContentLength = -1
	if resp.Close = hasCloseToken(hdr["Connection"]); resp.Close {
		delete(hdr, "Connection") // as net/http does
	}
	resp.Body = http.NoBody // the client reads the chunks itself
	return resp, end + 4
}

// plainValue reports whether b has only visible ASCII, spaces and tabs: no
// control byte (which net/http refuses or treats specially) and no byte
// above 0x7e (which it keeps as is, and so would we, but rarely worth the
// risk).
func plainValue(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

// commonNames interns the canonical names of headers that streaming
// servers send, so that they cost no allocation.
var commonNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"Cache-Control", "Connection", "Content-Type", "Date", "Keep-Alive",
		"Server", "Transfer-Encoding", "Content-Length", "Trailer", "Vary", "X-Accel-Buffering",
		"X-Request-Id", "Access-Control-Allow-Origin", "Set-Cookie", "Retry-After"} {
		m[n] = n
	}
	return m
}()

// canonicalName returns name in canonical form (as net/http stores it),
// when it is a plain token: letters, digits and '-' only.
func canonicalName(name []byte) (string, bool) {
	var buf [64]byte
	if len(name) > len(buf) {
		return "", false
	}
	upper := true
	for i, c := range name {
		switch {
		case 'a' <= c && c <= 'z':
			if upper {
				c -= 'a' - 'A'
			}
		case 'A' <= c && c <= 'Z':
			if !upper {
				c += 'a' - 'A'
			}
		case '0' <= c && c <= '9', c == '-':
		default:
			return "", false
		}
		buf[i] = c
		upper = c == '-'
	}
	canon := buf[:len(name)]
	if s, ok := commonNames[string(canon)]; ok {
		return s, true
	}
	return string(canon), true
}

// internValue returns common header values without an allocation.
func internValue(v []byte) string {
	switch string(v) {
	case "text/event-stream":
		return "text/event-stream"
	case "no-cache":
		return "no-cache"
	case "keep-alive":
		return "keep-alive"
	case "close":
		return "close"
	}
	return string(v)
}

// hasCloseToken reports whether a Connection header lists "close", as
// net/http decides Response.Close for HTTP/1.1.
func hasCloseToken(values []string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.Trim(t, " \t"), "close") {
				return true
			}
		}
	}
	return false
}
