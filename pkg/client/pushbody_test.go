package client

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

// pushBufferSize is the buffer the tests push through: small, so that
// lines and chunks cross its end.
const pushBufferSize = 2 << 10

// reset prepares b for a new body with a buffer of pushBufferSize.
func (b *pushBody) reset() {
	if b.buf == nil {
		b.buf = make([]byte, pushBufferSize)
	}
	*b = pushBody{buf: b.buf}
}

// space returns the free end of the buffer for the next push, moving the
// undecoded bytes to its front first, as the event loop keeps them.
func (b *pushBody) space() []byte {
	if b.r > 0 {
		b.w = copy(b.buf, b.buf[b.r:b.w])
		b.r = 0
	}
	return b.buf[b.w:]
}

// readPushed decodes in with pushBody, pushing it in pieces of the sizes
// given (cycled; 0 pushes nothing, a would-block round) and reading with
// p of readSize bytes between pushes, as the read loop does; at the end of
// in the socket says EOF.
func readPushed(t testing.TB, in []byte, sizes []int, readSize int) ([]byte, error) {
	var b pushBody
	b.reset()
	var out []byte
	p := make([]byte, readSize)
	for i := 0; ; i++ {
		for {
			n, err := b.Read(p)
			out = append(out, p[:n]...)
			if errors.Is(err, sse.ErrWouldBlock) {
				break
			}
			if err != nil {
				return out, err
			}
		}
		if b.rerr != nil {
			t.Fatalf("Read said ErrWouldBlock after the end of input")
		}
		if len(in) == 0 {
			b.rerr = io.EOF
			continue
		}
		size := len(in)
		if len(sizes) > 0 {
			size = sizes[i%len(sizes)]
		}
		space := b.space()
		k := copy(space, in[:min(size, len(in))])
		b.w += k
		in = in[k:]
		if i > 1<<20 {
			t.Fatal("no progress")
		}
	}
}

// TestPushBody runs chunkedBody's cases through pushBody, whole and one
// byte per push: the same data and the same errors.
func TestPushBody(t *testing.T) {
	for _, tt := range chunkedCases {
		for _, sizes := range [][]int{nil, {1}, {0, 3, 0, 7}} {
			got, err := readPushed(t, []byte(tt.in), sizes, 5)
			want := tt.err
			if want == nil {
				want = io.EOF // the decoder's clean end
			}
			if string(got) != tt.want || !errors.Is(err, want) {
				t.Errorf("%s (pushes %v): got %q, %v; want %q, %v", tt.name, sizes, got, err, tt.want, tt.err)
			}
		}
	}
	big := strings.Repeat("x", 0x1000) // a chunk larger than the buffer
	if got, err := readPushed(t, []byte("1000\r\n"+big+"\r\n0\r\n\r\n"), []int{700}, 64); string(got) != big || !errors.Is(err, io.EOF) {
		t.Errorf("a chunk larger than the buffer: %d bytes, %v; want %d, EOF", len(got), err, len(big))
	}
	long := "1" + strings.Repeat(" ", pushBufferSize) + "\r\na\r\n0\r\n\r\n"
	if _, err := readPushed(t, []byte(long), nil, 64); !errors.Is(err, errChunkLine) {
		t.Errorf("a chunk line longer than the buffer: %v, want %v", err, errChunkLine)
	}
}

// FuzzPushBody checks pushBody against chunkedBody, the pulled decoder
// that is itself checked against net/http: the same bytes, and an error
// exactly when chunkedBody has one, whatever the pushes' sizes.
func FuzzPushBody(f *testing.F) {
	for _, s := range []string{"3\r\nabc\r\n0\r\n\r\n", "1;a\r\nx\r\n0\r\nT: v\r\n\r\n", "a\nxxxxxxxxxx\n0\n\n", "0\r\n\r\n", "fffffffffffffffff\r\n", "2\r\nab\r\n0\r\n\r\nextra"} {
		f.Add([]byte(s), []byte{1, 0, 4}, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte, readSize uint8) {
		var sz []int
		for _, s := range sizes {
			sz = append(sz, int(s%9))
		}
		if len(sz) > 0 && !slices.ContainsFunc(sz, func(v int) bool { return v != 0 }) {
			sz = append(sz, 1)
		}
		got, err := readPushed(t, in, sz, int(readSize%16)+1)
		want, werr := readChunked(in, false)
		if werr != nil && strings.Contains(werr.Error(), "too long") {
			t.Skip("a framing line longer than readChunked's 32-byte buffer fits pushBody's")
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q pushed as %v: data %q, chunkedBody %q", in, sz, got, want)
		}
		if (errors.Is(err, io.EOF)) != (werr == nil) {
			t.Fatalf("%q pushed as %v: err %v, chunkedBody %v", in, sz, err, werr)
		}
	})
}
