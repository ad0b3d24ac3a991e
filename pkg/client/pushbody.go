package client

import (
	"bytes"
	"errors"
	"io"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

// errChunkLine is a chunk-size or trailer line longer than the buffer.
var errChunkLine = errors.New("chunk header line too long")

// pushBody decodes an HTTP/1.1 chunked body (RFC 9112, section 7.1) from
// bytes pushed into it as the socket delivers them, instead of pulling them
// with blocking reads: an event loop points buf at what it read (the bytes
// kept from earlier reads first) and the SSE reader above takes the decoded
// data through Read, which says sse.ErrWouldBlock when the buffered bytes
// hold no more data; the loop keeps what is left undecoded for the next
// read. The framing rules are chunkedBody's: CRLF line endings, extensions
// ignored, trailers discarded.
type pushBody struct {
	buf  []byte // socket bytes, while a read is handled; buf[r:w] are not decoded yet
	r, w int

	n        uint64 // data bytes of the current chunk not yet decoded
	crlf     bool   // the current chunk's data is decoded but not its CRLF
	trailers bool   // the last chunk was seen: reading the trailer section
	done     bool   // the body ended with its blank line

	err  error // sticky framing error
	rerr error // the socket's end (io.EOF) or read error, after buf[r:w]
}

// startBody starts decoding a body whose first byte is at b.r, keeping the
// bytes buffered and the socket's end if it came.
func (b *pushBody) startBody() {
	b.n, b.crlf, b.trailers, b.done, b.err = 0, false, false, false, nil
}

// leftover reports whether bytes follow the body's end: the connection
// then holds something that is not the next response's head.
func (b *pushBody) leftover() bool { return b.r < b.w }

// Read implements io.Reader for the SSE reader: it decodes as much buffered
// data as fits in p.
func (b *pushBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && b.err == nil && !b.done {
		if b.crlf {
			if b.w-b.r < 2 {
				break
			}
			if b.buf[b.r] != '\r' || b.buf[b.r+1] != '\n' {
				b.err = errMalformedChunk
				break
			}
			b.r += 2
			b.crlf = false
		}
		if b.n == 0 {
			if !b.framing() {
				break
			}
			continue
		}
		k := min(uint64(len(p)-n), b.n, uint64(b.w-b.r))
		if k == 0 {
			break
		}
		copy(p[n:], b.buf[b.r:b.r+int(k)])
		n += int(k)
		b.r += int(k)
		b.n -= k
		if b.n == 0 {
			b.crlf = true
		}
	}
	switch {
	case n > 0:
		return n, nil
	case b.err != nil:
		return 0, b.err
	case b.done:
		return 0, io.EOF
	case errors.Is(b.rerr, io.EOF):
		return 0, io.ErrUnexpectedEOF // the connection ended inside the body
	case b.rerr != nil:
		return 0, b.rerr
	case b.w-b.r == len(b.buf):
		b.err = errChunkLine // a line the buffer cannot hold
		return 0, b.err
	}
	return 0, sse.ErrWouldBlock
}

// data returns the current chunk's data bytes that are buffered, after
// consuming any framing before them, without decoding them: the caller
// parses them in place and says how many it used with consume. It returns
// nothing at the body's end, on a framing error (which Read then reports)
// or when no data byte is buffered.
func (b *pushBody) data() []byte {
	for b.err == nil && !b.done {
		if b.crlf {
			if b.w-b.r < 2 {
				return nil
			}
			if b.buf[b.r] != '\r' || b.buf[b.r+1] != '\n' {
				b.err = errMalformedChunk
				return nil
			}
			b.r += 2
			b.crlf = false
		}
		if b.n == 0 {
			if !b.framing() {
				return nil
			}
			continue
		}
		return b.buf[b.r : b.r+int(min(b.n, uint64(b.w-b.r)))]
	}
	return nil
}

// more reports whether the body may still bring data: it has not ended,
// failed, or met the socket's end.
func (b *pushBody) more() bool { return !b.done && b.err == nil && b.rerr == nil }

// consume marks n bytes of what data returned as decoded.
func (b *pushBody) consume(n int) {
	b.r += n
	b.n -= uint64(n)
	if b.n == 0 {
		b.crlf = true
	}
}

// framing consumes whole framing lines: a chunk-size line, or after the
// last chunk the trailer section. It reports whether it made progress.
func (b *pushBody) framing() bool {
	progress := false
	for !b.done {
		i := bytes.IndexByte(b.buf[b.r:b.w], '\n')
		if i < 0 {
			return progress
		}
		line := b.buf[b.r : b.r+i]
		b.r += i + 1
		progress = true
		if b.trailers {
			if len(bytes.TrimSuffix(line, []byte("\r"))) == 0 {
				b.done = true
			}
			continue
		}
		size, err := chunkSize(line)
		if err != nil {
			b.err = err
			return false
		}
		if size > 0 {
			b.n = size
			return true
		}
		b.trailers = true
	}
	return progress
}

// chunkSize parses a chunk-size line without its LF.
func chunkSize(line []byte) (uint64, error) {
	if !bytes.HasSuffix(line, []byte("\r")) {
		return 0, errMalformedChunk // a bare LF
	}
	line = line[:len(line)-1]
	if bytes.IndexByte(line, '\r') >= 0 {
		return 0, errMalformedChunk
	}
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i] // a chunk extension
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 || len(line) > 16 {
		return 0, errMalformedChunk
	}
	var size uint64
	for _, c := range line {
		v, ok := hexValue(c)
		if !ok {
			return 0, errMalformedChunk
		}
		size = size<<4 | uint64(v)
	}
	return size, nil
}
