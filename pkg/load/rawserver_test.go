package load

import (
	"bufio"
	"bytes"
	"container/heap"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// rawServer serves the scripted stream over plain HTTP/1.1 without
// net/http, for the benchmark, where the server shares a small machine's
// cores with the client being measured and must spend as little CPU per
// token as it can. It parses only the request line and Content-Length and
// writes the response head as soon as a request is read; tokens are written
// by a few scheduler goroutines (one per CPU) that keep every in-flight
// reply in a heap ordered by the next token's due time and, each time they
// wake, write every token that is due. That costs one write system call per
// token and no goroutine wake-up or timer per token. The last token goes out
// in one write with the finish, usage and [DONE] events and the chunked
// terminator.
type rawServer struct {
	s      *scripted
	shards []*tokenShard
	next   atomic.Uint32
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
	for range max(runtime.GOMAXPROCS(0), 1) {
		sh := &tokenShard{s: rs.s, wake: make(chan struct{}, 1)}
		rs.shards = append(rs.shards, sh)
		go sh.run()
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go rs.conn(c)
	}
}

// conn reads requests from c and hands each reply to a scheduler. The
// client sends its next request only after the reply's end, so the reader
// simply waits for it.
func (rs *rawServer) conn(c net.Conn) {
	sh := rs.shards[int(rs.next.Add(1))%len(rs.shards)]
	br := bufio.NewReaderSize(c, 8<<10)
	for {
		clen, ok := readRequestHead(br)
		if !ok {
			_ = c.Close()
			return
		}
		arrived := time.Now()
		if _, err := br.Discard(clen); err != nil {
			_ = c.Close()
			return
		}
		rs.s.read.add(time.Since(arrived))
		n := rs.s.n.Add(1)
		if _, err := c.Write(rawHeader); err != nil {
			_ = c.Close()
			return
		}
		sh.add(&reply{c: c, arrived: arrived, due: arrived.Add(rs.s.firstToken), k: rs.s.tokens(n)})
	}
}

// reply is one response being streamed: token i of k is due at due.
type reply struct {
	c       net.Conn
	arrived time.Time
	due     time.Time
	i, k    int
}

// tokenShard writes the tokens of its replies as they fall due.
type tokenShard struct {
	s    *scripted
	mu   sync.Mutex
	heap replyHeap
	wake chan struct{} // a reply became the earliest
}

func (sh *tokenShard) add(r *reply) {
	sh.mu.Lock()
	heap.Push(&sh.heap, r)
	first := sh.heap[0] == r
	sh.mu.Unlock()
	if first {
		select {
		case sh.wake <- struct{}{}:
		default:
		}
	}
}

func (sh *tokenShard) run() {
	t := time.NewTimer(time.Hour)
	var due, again []*reply
	var tail []byte
	for {
		now := time.Now()
		sh.mu.Lock()
		for len(sh.heap) > 0 && !sh.heap[0].due.After(now) {
			due = append(due, heap.Pop(&sh.heap).(*reply))
		}
		wait := time.Hour
		if len(sh.heap) > 0 {
			wait = sh.heap[0].due.Sub(now)
		}
		sh.mu.Unlock()
		if len(due) == 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-sh.wake:
				t.Stop()
			}
			continue
		}
		again = again[:0]
		for _, r := range due {
			tok := rawToken
			if r.i == 0 {
				wrote := time.Now()
				sh.s.late.add(wrote.Sub(r.due))
				// The first token carries the server's wall-clock arrival
				// and write times so the client side can split its TTFT.
				tok = chunked(mustEvent(openai.Chunk{Object: openai.ObjectChatCompletionChunk,
					Choices: []openai.ChunkChoice{{Delta: &openai.Delta{Content: stampToken(r.arrived, wrote)}}}}))
			}
			r.i++
			if r.i == r.k {
				tail = append(append(tail[:0], tok...), replyTail(r.k)...)
				tok = tail
			}
			if _, err := r.c.Write(tok); err != nil {
				_ = r.c.Close()
				continue
			}
			if r.i < r.k {
				r.due = r.due.Add(sh.s.gap)
				again = append(again, r)
			}
		}
		clear(due)
		due = due[:0]
		sh.mu.Lock()
		for _, r := range again {
			heap.Push(&sh.heap, r)
		}
		sh.mu.Unlock()
		clear(again)
	}
}

// replyTail is what follows a reply's last token: the finish and usage
// events, [DONE] and the chunked terminator.
func replyTail(k int) []byte {
	return bytes.Join([][]byte{chunked(finishEvent), chunked(mustEvent(usageChunk(k))), chunked(doneEvent), []byte("0\r\n\r\n")}, nil)
}

// replyHeap orders replies by due time (container/heap).
type replyHeap []*reply

func (h replyHeap) Len() int           { return len(h) }
func (h replyHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h replyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *replyHeap) Push(x any)        { *h = append(*h, x.(*reply)) }
func (h *replyHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
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
