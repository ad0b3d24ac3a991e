package load

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// rawServer serves the scripted stream over plain HTTP/1.1 without
// net/http, for the benchmark: it parses only the request line and
// Content-Length, and each token is one write of a prebuilt chunk. That keeps
// the server's CPU per token low on a small machine, where the server shares
// the cores with the client being measured. It keeps connections alive and
// uses one goroutine and one reused timer per connection.
type rawServer struct {
	s *scripted
}

// Prebuilt HTTP/1.1 pieces.
var (
	rawHeader = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
		"Transfer-Encoding: chunked\r\n\r\n")
	rawToken = chunked(tokenEvent)
)

// chunked frames b as one HTTP/1.1 chunk.
func chunked(b []byte) []byte {
	return fmt.Appendf(nil, "%x\r\n%s\r\n", len(b), b)
}

func (rs *rawServer) serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go rs.conn(c)
	}
}

func (rs *rawServer) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 8<<10)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		clen, ok := readRequestHead(br)
		if !ok {
			return
		}
		arrived := time.Now()
		if _, err := br.Discard(clen); err != nil {
			return
		}
		rs.s.read.add(time.Since(arrived))
		n := rs.s.n.Add(1)
		k := rs.s.tokens(n)
		if _, err := c.Write(rawHeader); err != nil {
			return
		}
		for i := range k {
			due := arrived.Add(rs.s.firstToken + time.Duration(i)*rs.s.gap)
			if d := time.Until(due); d > 0 {
				t.Reset(d)
				<-t.C
			}
			tok := rawToken
			if i == 0 {
				now := time.Now()
				rs.s.late.add(now.Sub(due))
				// The first token carries the server's wall-clock arrival
				// and write times so the client side can split its TTFT.
				tok = chunked(mustEvent(openai.Chunk{Object: openai.ObjectChatCompletionChunk,
					Choices: []openai.ChunkChoice{{Delta: &openai.Delta{Content: stampToken(arrived, now)}}}}))
			}
			if _, err := c.Write(tok); err != nil {
				return
			}
		}
		usage := mustEvent(usageChunk(k))
		tail := bytes.Join([][]byte{chunked(finishEvent), chunked(usage), chunked(doneEvent), []byte("0\r\n\r\n")}, nil)
		if _, err := c.Write(tail); err != nil {
			return
		}
	}
}

// readRequestHead reads a request line and headers and returns the
// Content-Length; false at EOF or on a malformed head.
func readRequestHead(br *bufio.Reader) (int, bool) {
	clen := 0
	first := true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, false
		}
		line = bytes.TrimRight(line, "\r\n")
		if first {
			first = false
			if !bytes.HasPrefix(line, []byte("POST ")) {
				return 0, false
			}
			continue
		}
		if len(line) == 0 {
			return clen, true
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")) {
			n, err := strconv.Atoi(string(bytes.TrimSpace(value)))
			if err != nil || n < 0 {
				return 0, false
			}
			clen = n
		}
	}
}

// stampToken is the first token's text: "a<arrival>w<write> " in Unix
// nanoseconds (wall clock, comparable between processes on one machine).
func stampToken(arrived, wrote time.Time) string {
	return "a" + strconv.FormatInt(arrived.UnixNano(), 10) + "w" + strconv.FormatInt(wrote.UnixNano(), 10) + " "
}

// parseStamp reads the server's times back from a reply's text.
func parseStamp(text string) (arrived, wrote time.Time, ok bool) {
	a, rest, ok1 := strings.Cut(strings.TrimPrefix(text, "a"), "w")
	w, _, ok2 := strings.Cut(rest, " ")
	an, err1 := strconv.ParseInt(a, 10, 64)
	wn, err2 := strconv.ParseInt(w, 10, 64)
	if !strings.HasPrefix(text, "a") || !ok1 || !ok2 || err1 != nil || err2 != nil {
		return time.Time{}, time.Time{}, false
	}
	return time.Unix(0, an), time.Unix(0, wn), true
}
