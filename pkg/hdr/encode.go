package hdr

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ErrCorrupt is returned by Decode for input that is not a V2 compressed
// histogram.
var ErrCorrupt = errors.New("corrupt encoded histogram")

// Encode returns h in HdrHistogram's V2 compressed format, base64 encoded as
// in HdrHistogram interval logs, so any HdrHistogram implementation can read
// it. The format carries the geometry and counts but not the clamp count:
// ship Clamped next to it (see SetClamped).
func (h *Histogram) Encode() ([]byte, error) {
	b, err := h.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("encode histogram: %w", err)
	}
	return b, nil
}

// V2 layout constants (HdrHistogram's encoding spec): an outer 8-byte header
// (cookie, compressed length) before the zlib stream, and a 40-byte header
// inside it (cookie, payload length, normalizing offset, significant digits,
// lowest, highest, conversion ratio).
const (
	outerHeaderLen = 8
	innerHeaderLen = 40
	cookieMask     = ^int32(0xf0)
	compressedV2   = hdrhistogram.V2CompressedEncodingCookieBase
	uncompressedV2 = hdrhistogram.V2EncodingCookieBase
)

// Decode parses a histogram written by Encode (or any HdrHistogram V2
// compressed base64 encoding). It returns an error wrapping ErrConfigMismatch
// when the encoded geometry is not cfg's, and one wrapping ErrCorrupt for
// malformed input; it never panics. The clamp count of the result is 0.
//
// The geometry is checked from the header before the counts array is
// allocated, so hostile input cannot make Decode allocate more than cfg's
// histogram.
func Decode(cfg Config, b []byte) (*Histogram, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	got, err := peekConfig(b)
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w: %w", ErrCorrupt, err)
	}
	if got != cfg {
		return nil, fmt.Errorf("decode histogram %s as %s: %w", got.Fingerprint(), cfg.Fingerprint(), ErrConfigMismatch)
	}
	hh, err := hdrhistogram.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w: %w", ErrCorrupt, err)
	}
	// Belt and braces: the header peek and the decoder must agree.
	if hh.LowestTrackableValue() != cfg.LowestMicros || hh.HighestTrackableValue() != cfg.HighestMicros ||
		hh.SignificantFigures() != int64(cfg.SigFigs) {
		return nil, fmt.Errorf("decode histogram as %s: %w", cfg.Fingerprint(), ErrConfigMismatch)
	}
	return &Histogram{cfg: cfg, h: hh}, nil
}

// peekConfig reads the geometry from the headers of a base64 V2 compressed
// histogram, inflating only the 40-byte inner header.
func peekConfig(b []byte) (Config, error) {
	raw, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		return Config{}, err
	}
	if len(raw) < outerHeaderLen {
		return Config{}, fmt.Errorf("%d bytes is shorter than the header", len(raw))
	}
	if c := int32(binary.BigEndian.Uint32(raw)) & cookieMask; c != compressedV2 {
		return Config{}, fmt.Errorf("cookie %#x is not V2 compressed", c)
	}
	z, err := zlib.NewReader(bytes.NewReader(raw[outerHeaderLen:]))
	if err != nil {
		return Config{}, err
	}
	defer z.Close()
	var hd [innerHeaderLen]byte
	if _, err := io.ReadFull(z, hd[:]); err != nil {
		return Config{}, fmt.Errorf("read inner header: %w", err)
	}
	if c := int32(binary.BigEndian.Uint32(hd[0:])) & cookieMask; c != uncompressedV2 {
		return Config{}, fmt.Errorf("inner cookie %#x is not V2", c)
	}
	return Config{
		SigFigs:       int(int32(binary.BigEndian.Uint32(hd[12:]))),
		LowestMicros:  int64(binary.BigEndian.Uint64(hd[16:])),
		HighestMicros: int64(binary.BigEndian.Uint64(hd[24:])),
	}, nil
}
