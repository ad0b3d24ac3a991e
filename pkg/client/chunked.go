package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// errMalformedChunk is returned for a chunked body that breaks the framing.
var errMalformedChunk = errors.New("malformed chunked encoding")

// chunkedBody decodes an HTTP/1.1 chunked body (RFC 9112, section 7.1) from
// the connection's buffered reader. It is what net/http's chunked reader
// does without the layers around it (a mutex and end-of-body bookkeeping on
// every read), which matter when every token is a chunk. Like net/http it
// requires CRLF line endings in the framing, ignores chunk extensions and
// discards trailers. Read returns what it has rather than wait for the next
// chunk.
type chunkedBody struct {
	br   *bufio.Reader
	n    uint64 // unread bytes of the current chunk
	crlf bool   // the current chunk's data is read but not the CRLF after it
	err  error  // sticky; io.EOF after the last chunk and the trailers
}

func (b *chunkedBody) reset(br *bufio.Reader) { *b = chunkedBody{br: br} }

// Read implements io.Reader.
func (b *chunkedBody) Read(p []byte) (n int, err error) {
	for n < len(p) && b.err == nil {
		if b.crlf {
			if n > 0 && !b.buffered(false) {
				break
			}
			if b.err = b.readCRLF(); b.err != nil {
				break
			}
			b.crlf = false
		}
		if b.n == 0 {
			if n > 0 && !b.buffered(true) {
				break
			}
			b.err = b.beginChunk()
			continue
		}
		if n > 0 && b.br.Buffered() == 0 {
			break
		}
		k := len(p) - n
		if uint64(k) > b.n {
			k = int(b.n)
		}
		m, rerr := b.br.Read(p[n : n+k])
		n += m
		b.n -= uint64(m)
		if b.n == 0 {
			b.crlf = true
		}
		if rerr != nil {
			if rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF
			}
			b.err = rerr
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, b.err
}

// buffered reports whether the next CRLF (line false) or the next whole
// line (line true) is already buffered, so reading it cannot block.
func (b *chunkedBody) buffered(line bool) bool {
	pk, _ := b.br.Peek(b.br.Buffered())
	if line {
		return bytes.IndexByte(pk, '\n') >= 0
	}
	return len(pk) >= 2
}

func (b *chunkedBody) readCRLF() error {
	c, err := b.br.ReadByte()
	if err == nil && c == '\r' {
		c, err = b.br.ReadByte()
		if err == nil && c == '\n' {
			return nil
		}
	}
	switch {
	case err == io.EOF:
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	return errMalformedChunk
}

// beginChunk reads a chunk-size line. After the last chunk it reads the
// trailers and returns io.EOF.
func (b *chunkedBody) beginChunk() error {
	line, err := b.line()
	if err != nil {
		return err
	}
	size, err := chunkSize(line)
	if err != nil {
		return err
	}
	if size > 0 {
		b.n = size
		return nil
	}
	for {
		line, err := b.line()
		if err != nil {
			return err
		}
		if len(bytes.TrimSuffix(line, []byte("\r"))) == 0 {
			return io.EOF
		}
	}
}

// line reads one line without its LF; a line longer than the buffer is an
// error.
func (b *chunkedBody) line() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	switch {
	case err == io.EOF:
		return nil, io.ErrUnexpectedEOF
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, errors.New("chunk header line too long")
	case err != nil:
		return nil, err
	}
	return line[:len(line)-1], nil
}
