package servermetrics

import "math"

// bucket is one cumulative bucket of a Prometheus histogram: cum
// observations were <= le.
type bucket struct {
	le  float64
	cum float64
}

// hist is a classic Prometheus histogram: cumulative finite buckets sorted
// by upper bound, the observation count (the +Inf bucket) and their sum.
type hist struct {
	buckets []bucket
	count   float64
	sum     float64
}

// histDelta returns end minus start, bucket by bucket. A count that went
// down means the server restarted: the delta is then end itself (what was
// observed since the restart) and reset is true. Buckets are matched by
// upper bound; a bound start lacks counts from zero.
func histDelta(start, end hist) (d hist, reset bool) {
	if end.count < start.count {
		return end, true
	}
	d = hist{count: end.count - start.count, sum: end.sum - start.sum, buckets: make([]bucket, len(end.buckets))}
	j := 0
	for i, b := range end.buckets {
		for j < len(start.buckets) && start.buckets[j].le < b.le {
			j++
		}
		prev := 0.0
		if j < len(start.buckets) && start.buckets[j].le == b.le {
			prev = start.buckets[j].cum
		}
		if b.cum < prev {
			return end, true
		}
		d.buckets[i] = bucket{le: b.le, cum: b.cum - prev}
	}
	return d, false
}

// add returns a+b. Histograms with different bucket bounds cannot be
// added bucket by bucket: the result then keeps count and sum (so the mean
// stays exact) and drops the buckets, and ok is false.
func (a hist) add(b hist) (sum hist, ok bool) {
	out := hist{count: a.count + b.count, sum: a.sum + b.sum}
	if a.count == 0 && len(a.buckets) == 0 {
		out.buckets = append([]bucket(nil), b.buckets...)
		return out, true
	}
	if len(a.buckets) != len(b.buckets) {
		return out, false
	}
	out.buckets = make([]bucket, len(a.buckets))
	for i := range a.buckets {
		if a.buckets[i].le != b.buckets[i].le {
			return hist{count: out.count, sum: out.sum}, false
		}
		out.buckets[i] = bucket{le: a.buckets[i].le, cum: a.buckets[i].cum + b.buckets[i].cum}
	}
	return out, true
}

// quantile estimates the q-quantile (0..1) by linear interpolation inside
// the bucket holding the rank, as Prometheus's histogram_quantile does: the
// lowest bucket starts at 0 (or at its bound when that is <= 0), and a rank
// in the +Inf bucket returns the highest finite bound. ok is false when
// there are no observations or no buckets.
func (h hist) quantile(q float64) (v float64, ok bool) {
	if h.count <= 0 || len(h.buckets) == 0 || math.IsNaN(q) {
		return 0, false
	}
	rank := q * h.count
	prevLE, prevCum := 0.0, 0.0
	for i, b := range h.buckets {
		if b.cum >= rank && b.cum > prevCum {
			if i == 0 && b.le <= 0 {
				return b.le, true
			}
			return prevLE + (b.le-prevLE)*(rank-prevCum)/(b.cum-prevCum), true
		}
		prevLE, prevCum = b.le, b.cum
	}
	return h.buckets[len(h.buckets)-1].le, true
}
