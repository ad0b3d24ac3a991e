package result

import "time"

// PeakResolution is the spacing of the ticks at which Peaks counts the
// requests in flight: the ticks are origin + k·PeakResolution, k ≥ 0.
const PeakResolution = time.Millisecond

// ticksPerPage is one second of ticks: a page of the timeline is 4 kB.
const ticksPerPage = int(time.Second / PeakResolution)

// maxTicks is the timeline's horizon, MaxPeakSeconds.
const maxTicks = MaxPeakSeconds * ticksPerPage

// timeline is the number of requests in flight at every tick, kept as
// deltas: delta[k] = (sends in (tick k-1, tick k]) - (ends in (tick k-1,
// tick k]), with tick -1 = -∞. The prefix sum at k is then
//
//	#{send ≤ tick k} - #{end ≤ tick k} = #{requests with send ≤ tick k < end}
//
// (every request has send ≤ end), which is the exact number of requests in
// flight at the instant tick k, whatever the order of sends and ends
// between ticks: a request is counted at a tick only if its half-open
// [send, end) holds that instant, so two requests that merely touch (one
// ends at the very instant the next is sent) are never both counted, and
// a request shorter than the gap between ticks that holds no tick adds +1
// and -1 at one index. Counts at one instant add across timelines, so a
// merge is a sum of deltas, exact as well.
//
// Ticks live in pages of one second allocated when first written, so the
// memory is 4 kB per second of the span the timeline's requests cover
// (14.4 MB per hour), whatever the request rate, plus a pointer per second
// from the origin. timeline is not safe for concurrent use; Peaks guards it.
type timeline struct {
	pages []*[ticksPerPage]int32
}

// tickAtOrAfter is the index of the first tick at or after d (d ≥ 0).
func tickAtOrAfter(d time.Duration) int {
	return int((d + PeakResolution - 1) / PeakResolution)
}

// span adds one request in flight over [send, end), both offsets from the
// origin with 0 ≤ send ≤ end. A request sent beyond the horizon is not
// counted; one ending beyond it stays in flight until the horizon.
func (t *timeline) span(send, end time.Duration) {
	first, last := tickAtOrAfter(send), tickAtOrAfter(end)
	if first == last || first >= maxTicks {
		return // holds no tick
	}
	t.add(first, 1)
	if last < maxTicks {
		t.add(last, -1)
	}
}

func (t *timeline) add(tick int, d int32) {
	t.page(tick / ticksPerPage)[tick%ticksPerPage] += d
}

// page returns page i, allocating it (and the pointers up to it) if needed.
func (t *timeline) page(i int) *[ticksPerPage]int32 {
	if i >= len(t.pages) {
		t.pages = append(t.pages, make([]*[ticksPerPage]int32, i+1-len(t.pages))...)
	}
	if t.pages[i] == nil {
		t.pages[i] = new([ticksPerPage]int32)
	}
	return t.pages[i]
}

// clone returns a deep copy of t.
func (t *timeline) clone() timeline {
	c := timeline{pages: make([]*[ticksPerPage]int32, len(t.pages))}
	for i, pg := range t.pages {
		if pg != nil {
			cp := *pg
			c.pages[i] = &cp
		}
	}
	return c
}

// merge adds o's deltas into t.
func (t *timeline) merge(o *timeline) {
	for i, pg := range o.pages {
		if pg == nil {
			continue
		}
		dst := t.page(i)
		for k, d := range pg {
			dst[k] += d
		}
	}
}

// max is the highest number of requests in flight at any tick.
func (t *timeline) max() int64 {
	var n, m int64
	for _, pg := range t.pages {
		if pg == nil {
			continue // no deltas: the count holds through the page
		}
		for _, d := range pg {
			n += int64(d)
			m = max(m, n)
		}
	}
	return m
}
