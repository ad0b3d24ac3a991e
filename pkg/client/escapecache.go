package client

import "sync/atomic"

// A conversation sends its whole history with every turn, and many
// conversations share one long system prompt or document, so the same long
// strings are escaped for JSON again and again: at 12 KB of system prompt,
// escaping is most of building a request. escapeCache remembers the escaped
// form of recent long strings.
//
// It is direct-mapped: a string's slot comes from its length and a few of its
// bytes, and a hit needs the slot's string to equal it. Equality costs a
// pointer comparison when the string is the very one cached (the usual case:
// the same system prompt, the same history entries) and a memory comparison
// otherwise, both far cheaper than escaping. A miss escapes as before and
// takes the slot. Strings are immutable, so a hit is exactly what escaping
// would give.
const (
	escapeCacheSlots = 256     // a power of two
	escapeCacheMin   = 1 << 10 // shorter strings escape faster than a lookup
	escapeCacheMax   = 1 << 20 // a bound on what an entry may hold
)

// escapeCache is safe for concurrent use.
type escapeCache struct {
	slots [escapeCacheSlots]atomic.Pointer[escapeEntry]
}

// escapeEntry is a string and its escaped form; esc is nil when escaping
// leaves the string as it is (plain text: the entry holds no copy).
type escapeEntry struct {
	s   string
	esc []byte
}

// appendEscaped appends s escaped as appendEscaped does, from the cache when
// s is long and was escaped recently.
func (c *escapeCache) appendEscaped(dst []byte, s string) []byte {
	if c == nil || len(s) < escapeCacheMin || len(s) > escapeCacheMax {
		return appendEscaped(dst, s)
	}
	slot := &c.slots[escapeSlot(s)]
	if e := slot.Load(); e != nil && e.s == s {
		if e.esc == nil {
			return append(dst, s...)
		}
		return append(dst, e.esc...)
	}
	start := len(dst)
	dst = appendEscaped(dst, s)
	e := &escapeEntry{s: s}
	if out := dst[start:]; len(out) != len(s) || string(out) != s {
		e.esc = append([]byte(nil), out...)
	}
	slot.Store(e)
	return dst
}

// escapeSlot picks s's slot from its length and three of its 8-byte words;
// len(s) >= 8.
func escapeSlot(s string) int {
	h := uint64(len(s))
	h = h*0x9e3779b97f4a7c15 ^ load64(s)
	h = h*0x9e3779b97f4a7c15 ^ load64(s[len(s)/2-4:])
	h = h*0x9e3779b97f4a7c15 ^ load64(s[len(s)-8:])
	h ^= h >> 29
	return int(h*0xbf58476d1ce4e5b9>>56) & (escapeCacheSlots - 1)
}
