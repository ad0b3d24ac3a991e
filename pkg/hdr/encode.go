package hdr

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ErrCorrupt is returned by Decode for input that is not a V2 compressed
// histogram.
var ErrCorrupt = errors.New("corrupt encoded histogram")

// EncodeLevel is the zlib level Encode compresses with. The format does not
// depend on it (any zlib level inflates the same way); BestSpeed costs a
// fraction of BestCompression's CPU for a few percent more bytes on
// latency histograms (see BenchmarkEncodeLevels).
const EncodeLevel = zlib.BestSpeed

// V2 layout constants (HdrHistogram's encoding spec): an outer 8-byte header
// (cookie, compressed length) before the zlib stream, and a 40-byte header
// inside it (cookie, payload length, normalizing offset, significant digits,
// lowest, highest, conversion ratio), then the counts as ZigZag LEB128
// varints where a negative value is a run of that many zero counts.
const (
	outerHeaderLen = 8
	innerHeaderLen = 40
	cookieMask     = ^int32(0xf0)
	compressedV2   = hdrhistogram.V2CompressedEncodingCookieBase
	uncompressedV2 = hdrhistogram.V2EncodingCookieBase
	// The cookies as written: the base with word size 8 (0x10), as
	// hdrhistogram-go and Java write them.
	compressedCookie   = compressedV2 | 0x10
	uncompressedCookie = uncompressedV2 | 0x10
	maxVarint          = 9
)

// coder is the reusable state of one Encode or Decode: the zlib writer or
// reader and the byte buffers. Pooled, so an encode or decode allocates
// little beyond its result.
type coder struct {
	raw  []byte // uncompressed inner header and payload
	zbuf bytes.Buffer
	zw   *zlib.Writer
	zr   io.ReadCloser
	in   bytes.Reader
	b64  []byte
}

var coders = sync.Pool{New: func() any { return new(coder) }}

// Encode returns h in HdrHistogram's V2 compressed format, base64 encoded as
// in HdrHistogram interval logs, so any HdrHistogram implementation can read
// it. The inner payload is byte for byte what hdrhistogram-go writes; only
// the zlib level differs (EncodeLevel). The format carries the geometry and
// counts but not the clamp count: ship Clamped next to it (see SetClamped).
// Encode is safe to call concurrently on different histograms, and with
// other readers of h.
func (h *Histogram) Encode() ([]byte, error) {
	c := coders.Get().(*coder)
	defer coders.Put(c)
	raw := appendPayload(append(c.raw[:0], make([]byte, innerHeaderLen)...), h)
	hd := raw[:innerHeaderLen]
	binary.BigEndian.PutUint32(hd[0:], uint32(uncompressedCookie))
	binary.BigEndian.PutUint32(hd[4:], uint32(len(raw)-innerHeaderLen))
	binary.BigEndian.PutUint32(hd[8:], 0) // normalizing index offset
	binary.BigEndian.PutUint32(hd[12:], uint32(h.cfg.SigFigs))
	binary.BigEndian.PutUint64(hd[16:], uint64(h.cfg.LowestMicros))
	binary.BigEndian.PutUint64(hd[24:], uint64(h.cfg.HighestMicros))
	binary.BigEndian.PutUint64(hd[32:], math.Float64bits(1))
	c.raw = raw

	c.zbuf.Reset()
	c.zbuf.Write(make([]byte, outerHeaderLen))
	if c.zw == nil {
		zw, err := zlib.NewWriterLevel(&c.zbuf, EncodeLevel)
		if err != nil {
			return nil, fmt.Errorf("encode histogram: %w", err)
		}
		c.zw = zw
	} else {
		c.zw.Reset(&c.zbuf)
	}
	if _, err := c.zw.Write(raw); err != nil {
		return nil, fmt.Errorf("encode histogram: %w", err)
	}
	if err := c.zw.Close(); err != nil {
		return nil, fmt.Errorf("encode histogram: %w", err)
	}
	z := c.zbuf.Bytes()
	binary.BigEndian.PutUint32(z[0:], uint32(compressedCookie))
	binary.BigEndian.PutUint32(z[4:], uint32(len(z)-outerHeaderLen))
	out := make([]byte, base64.StdEncoding.EncodedLen(len(z)))
	base64.StdEncoding.Encode(out, z)
	return out, nil
}

// appendCounts appends the V2 payload of a full counts array: every count
// up to the last non-zero one (at least one), a run of two or more zeros as
// its negated length.
func appendCounts(b []byte, counts []int64) []byte {
	limit := 1
	for i := len(counts) - 1; i > 0; i-- {
		if counts[i] != 0 {
			limit = i + 1
			break
		}
	}
	for i := 0; i < limit; {
		n := counts[i]
		i++
		if n == 0 {
			zeros := int64(1)
			for i < limit && counts[i] == 0 {
				zeros++
				i++
			}
			if zeros > 1 {
				n = -zeros
			}
		}
		b = appendZigZag(b, n)
	}
	return b
}

// appendZigZag appends v as HdrHistogram's ZigZag LEB128-64b9B varint: seven
// bits per byte for the first eight bytes, all eight bits in a ninth.
func appendZigZag(b []byte, v int64) []byte {
	u := uint64((v << 1) ^ (v >> 63))
	for i := 0; i < 8; i++ {
		if u>>7 == 0 {
			return append(b, byte(u))
		}
		b = append(b, byte(u&0x7f|0x80))
		u >>= 7
	}
	return append(b, byte(u))
}

// readZigZag reads one varint written by appendZigZag; n is 0 when b is
// truncated. A one-byte varint (a count below 64, a zero run below 65) is
// read inline: most of a report's are.
func readZigZag(b []byte) (v int64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint64(b[0])
		return int64((u >> 1) ^ -(u & 1)), 1
	}
	return readZigZagLong(b)
}

// readZigZagLong is readZigZag for varints of any length. Two-byte ones
// (counts below 8,192, zero runs of 65 to 8,192 between a report's
// buckets) are read without the loop.
func readZigZagLong(b []byte) (v int64, n int) {
	if len(b) > 1 && b[0] >= 0x80 && b[1] < 0x80 {
		u := uint64(b[0]&0x7f) | uint64(b[1])<<7
		return int64((u >> 1) ^ -(u & 1)), 2
	}
	var u uint64
	for i := 0; i < maxVarint; i++ {
		if i >= len(b) {
			return 0, 0
		}
		if i == 8 {
			u |= uint64(b[i]) << 56
			n = 9
			break
		}
		u |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			n = i + 1
			break
		}
	}
	return int64((u >> 1) ^ -(u & 1)), n
}

// geometry is the index layout of a Config, as HdrHistogram computes it.
type geometry struct {
	unitMagnitude   uint
	subHalfCountMag uint
	subHalfCount    int
	countsLen       int
}

// defaultGeometry is Default's geometry, computed once: the coordinator
// needs it for every histogram of every report (FromSparse).
var defaultGeometry = computeGeometry(Default)

// geometryOf returns c's geometry.
func geometryOf(c Config) geometry {
	if c == Default {
		return defaultGeometry
	}
	return computeGeometry(c)
}

func computeGeometry(c Config) geometry {
	subCountMag := int(math.Ceil(math.Log2(2 * math.Pow10(c.SigFigs))))
	subHalfMag := max(subCountMag, 1) - 1
	unit := uint(bits.Len64(uint64(c.LowestMicros)) - 1) // floor(log2(lowest))
	subCount := int64(1) << (subHalfMag + 1)
	// Buckets needed to cover HighestMicros (HdrHistogram's
	// getBucketsNeededToCoverValue).
	smallestUntrackable := subCount << unit
	buckets := 1
	for smallestUntrackable <= c.HighestMicros {
		if smallestUntrackable > math.MaxInt64/2 {
			buckets++
			break
		}
		smallestUntrackable <<= 1
		buckets++
	}
	return geometry{
		unitMagnitude: unit, subHalfCountMag: uint(subHalfMag), subHalfCount: 1 << subHalfMag,
		countsLen: (buckets + 1) * (1 << subHalfMag),
	}
}

// indexOf returns the counts index of value v >= 0, as hdrhistogram-go's
// countsIndexFor computes it.
func (g geometry) indexOf(v int64) int {
	subBucketMask := uint64(2*g.subHalfCount-1) << g.unitMagnitude
	pow2Ceiling := 64 - bits.LeadingZeros64(uint64(v)|subBucketMask)
	bucket := pow2Ceiling - int(g.unitMagnitude) - int(g.subHalfCountMag+1)
	sub := int(v >> (uint(bucket) + g.unitMagnitude))
	return (bucket+1)<<g.subHalfCountMag + sub - g.subHalfCount
}

// valueAt returns the lowest value of counts index i.
func (g geometry) valueAt(i int) int64 {
	bucket := (i >> g.subHalfCountMag) - 1
	sub := (i & (g.subHalfCount - 1)) + g.subHalfCount
	if bucket < 0 {
		sub -= g.subHalfCount
		bucket = 0
	}
	return int64(sub) << (uint(bucket) + g.unitMagnitude)
}

// Decode parses a histogram written by Encode (or any HdrHistogram V2
// compressed base64 encoding). It returns an error wrapping ErrConfigMismatch
// when the encoded geometry is not cfg's, and one wrapping ErrCorrupt for
// malformed input; it never panics. The clamp count of the result is 0.
//
// The geometry is checked from the header before anything is inflated
// further, and the payload is bounded by cfg's geometry, so hostile input
// cannot make Decode allocate more than cfg's histogram. Buffers and the
// zlib reader are pooled: the result's counts array is the one large
// allocation. Decode is safe for concurrent use.
func Decode(cfg Config, b []byte) (*Histogram, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	c := coders.Get().(*coder)
	defer coders.Put(c)
	h := cfg.New()
	if err := c.decodeInto(h, b); err != nil {
		return nil, err
	}
	return h, nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("decode histogram: %w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// decodeInto fills the empty histogram h from b.
func (c *coder) decodeInto(h *Histogram, b []byte) error {
	payload, s, err := c.inflate(h.cfg, b)
	if err != nil {
		return err
	}
	s.payload = payload
	if dropped := s.addTo(h.full(), &h.total); dropped > 0 {
		// inflate bounded the indices and the total, so an empty histogram
		// takes every count.
		return corrupt("%d values did not fit", dropped)
	}
	return nil
}

// inflate checks b's headers against cfg, inflates its payload into c's
// buffer and validates it: every index within cfg's counts array and the
// counts' sum within int64. It returns the payload (valid until c is reused)
// and a sparse with the geometry and count filled in.
func (c *coder) inflate(cfg Config, b []byte) ([]byte, sparse, error) {
	n := base64.StdEncoding.DecodedLen(len(b))
	if cap(c.b64) < n {
		c.b64 = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(c.b64[:n], b)
	if err != nil {
		return nil, sparse{}, corrupt("%v", err)
	}
	raw := c.b64[:n]
	if len(raw) < outerHeaderLen {
		return nil, sparse{}, corrupt("%d bytes is shorter than the header", len(raw))
	}
	if ck := int32(binary.BigEndian.Uint32(raw)) & cookieMask; ck != compressedV2 {
		return nil, sparse{}, corrupt("cookie %#x is not V2 compressed", ck)
	}
	clen := int64(int32(binary.BigEndian.Uint32(raw[4:])))
	if clen < 0 || clen > int64(len(raw)-outerHeaderLen) {
		return nil, sparse{}, corrupt("compressed length %d, have %d bytes", clen, len(raw)-outerHeaderLen)
	}
	c.in.Reset(raw[outerHeaderLen : outerHeaderLen+clen])
	if c.zr == nil {
		zr, err := zlib.NewReader(&c.in)
		if err != nil {
			return nil, sparse{}, corrupt("%v", err)
		}
		c.zr = zr
	} else if err := c.zr.(zlib.Resetter).Reset(&c.in, nil); err != nil {
		return nil, sparse{}, corrupt("%v", err)
	}
	var hd [innerHeaderLen]byte
	if _, err := io.ReadFull(c.zr, hd[:]); err != nil {
		return nil, sparse{}, corrupt("read inner header: %v", err)
	}
	if ck := int32(binary.BigEndian.Uint32(hd[0:])) & cookieMask; ck != uncompressedV2 {
		return nil, sparse{}, corrupt("inner cookie %#x is not V2", ck)
	}
	got := Config{
		SigFigs:       int(int32(binary.BigEndian.Uint32(hd[12:]))),
		LowestMicros:  int64(binary.BigEndian.Uint64(hd[16:])),
		HighestMicros: int64(binary.BigEndian.Uint64(hd[24:])),
	}
	if got != cfg {
		return nil, sparse{}, fmt.Errorf("decode histogram %s as %s: %w", got.Fingerprint(), cfg.Fingerprint(), ErrConfigMismatch)
	}
	g := geometryOf(cfg)
	plen := int64(int32(binary.BigEndian.Uint32(hd[4:])))
	if plen < 0 || plen > int64(g.countsLen)*maxVarint {
		return nil, sparse{}, corrupt("payload length %d out of range", plen)
	}
	if cap(c.raw) < int(plen)+1 {
		c.raw = make([]byte, plen+1)
	}
	// Read one byte past the payload so trailing data is detected; reaching
	// EOF also verifies the zlib checksum.
	buf := c.raw[:plen+1]
	got1, err := io.ReadFull(c.zr, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		if int64(got1) != plen {
			return nil, sparse{}, corrupt("payload is %d bytes, header says %d", got1, plen)
		}
	case err != nil:
		return nil, sparse{}, corrupt("%v", err)
	default:
		return nil, sparse{}, corrupt("payload is longer than the %d bytes the header says", plen)
	}
	payload := buf[:plen]
	total, err := validate(payload, g)
	if err != nil {
		return nil, sparse{}, err
	}
	return payload, sparse{g: g, count: total}, nil
}

// validate walks a V2 payload of geometry g and returns the sum of its
// counts, or an ErrCorrupt error when a varint is truncated, an index or
// zero run passes the counts array or the sum passes MaxInt64.
func validate(payload []byte, g geometry) (int64, error) {
	idx := 0
	var total int64
	for pos := 0; pos < len(payload); {
		// One-byte varints (most counts and zero runs) are read inline.
		var v int64
		if b := payload[pos]; b < 0x80 {
			v = int64(b>>1) ^ -int64(b&1)
			pos++
		} else {
			var n int
			if v, n = readZigZagLong(payload[pos:]); n == 0 {
				return 0, corrupt("truncated count at byte %d", pos)
			}
			pos += n
		}
		if v < 0 {
			if v == math.MinInt64 || -v > int64(g.countsLen-idx) {
				return 0, corrupt("zero run of %d at index %d overflows %d counts", -v, idx, g.countsLen)
			}
			idx += int(-v)
			continue
		}
		if idx >= g.countsLen {
			return 0, corrupt("index %d overflows %d counts", idx, g.countsLen)
		}
		if v > math.MaxInt64-total {
			return 0, corrupt("counts sum past MaxInt64 at index %d", idx)
		}
		total += v
		idx++
	}
	return total, nil
}
