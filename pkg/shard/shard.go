package shard

import (
	"errors"
	"fmt"
	"slices"
)

// ErrNoMembers is returned when a rule needs at least one agent.
var ErrNoMembers = errors.New("no agents")

// ErrCapacity is returned when the agents' capacities cannot hold a level.
var ErrCapacity = errors.New("level exceeds the agents' capacity")

// Weight is the rendezvous weight of agent index member for conversation
// conv. It is a bijective 64-bit mix of both, so weights of one conversation
// differ across members and ties do not occur in practice (Owner breaks them
// by the lower index anyway).
func Weight(conv int, member int) uint64 {
	return mix(mix(uint64(conv)) ^ mix(uint64(member)+0x632be59bd9b4e019))
}

// Owner returns the member that owns conversation conv: the one with the
// highest Weight. members need not be sorted; it returns ErrNoMembers when
// it is empty.
func Owner(conv int, members []int) (int, error) {
	if len(members) == 0 {
		return 0, fmt.Errorf("find owner of conversation %d: %w", conv, ErrNoMembers)
	}
	return owner(conv, members), nil
}

func owner(conv int, members []int) int {
	best, bestW := members[0], Weight(conv, members[0])
	for _, m := range members[1:] {
		w := Weight(conv, m)
		if w > bestW || (w == bestW && m < best) {
			best, bestW = m, w
		}
	}
	return best
}

// Owns reports whether member self owns conversation conv among members.
func Owns(conv, self int, members []int) bool {
	return len(members) > 0 && owner(conv, members) == self
}

// Members returns the member list of a full fleet of n agents: 0..n-1.
func Members(n int) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = i
	}
	return m
}

// Split divides level sessions among len(capacity) agents so the shares sum
// to level exactly. Shares are as equal as the capacities allow (capacity 0
// means unlimited): agents whose capacity is below the fair share get their
// capacity and the rest is spread over the others; the remainder of an
// uneven division goes to the lowest positions, so raising the level by one
// changes one share by one. It returns ErrCapacity when the capacities sum
// to less than level and ErrNoMembers when there are no agents and level > 0.
func Split(level int, capacity []int) ([]int, error) {
	if level < 0 {
		return nil, fmt.Errorf("split level %d: level is negative", level)
	}
	shares := make([]int, len(capacity))
	if level == 0 {
		return shares, nil
	}
	if len(capacity) == 0 {
		return nil, fmt.Errorf("split level %d: %w", level, ErrNoMembers)
	}
	open := make([]int, 0, len(capacity)) // positions not yet capped
	total, unlimited := 0, false
	for i, c := range capacity {
		if c < 0 {
			return nil, fmt.Errorf("split level %d: capacity %d of agent %d is negative", level, c, i)
		}
		open = append(open, i)
		total += c
		unlimited = unlimited || c == 0
	}
	if !unlimited && total < level {
		return nil, fmt.Errorf("split level %d over capacity %d: %w", level, total, ErrCapacity)
	}
	left := level
	// Water filling: cap everyone whose capacity is below the fair share of
	// what is left, then repeat with the others; at most len rounds.
	for {
		fair := left / len(open)
		capped := false
		next := open[:0:0]
		for _, i := range open {
			if c := capacity[i]; c != 0 && c <= fair {
				shares[i] = c
				left -= c
				capped = true
				continue
			}
			next = append(next, i)
		}
		open = next
		if !capped || len(open) == 0 {
			break
		}
	}
	if len(open) > 0 {
		fair, rem := left/len(open), left%len(open)
		for k, i := range open {
			shares[i] = fair
			if k < rem {
				shares[i]++
			}
		}
	}
	return shares, nil
}

// SplitRate divides an open loop's request rate in proportion to the
// concurrency shares (or equally when every share is 0).
func SplitRate(rate float64, shares []int) []float64 {
	out := make([]float64, len(shares))
	sum := 0
	for _, s := range shares {
		sum += s
	}
	for i, s := range shares {
		if sum == 0 {
			out[i] = rate / float64(len(shares))
			continue
		}
		out[i] = rate * float64(s) / float64(sum)
	}
	return out
}

// Moved returns the conversations among 0..n-1 whose owner differs between
// the member lists before and after, for checking how much a change moves.
func Moved(n int, before, after []int) []int {
	var out []int
	for i := range n {
		if len(before) == 0 || len(after) == 0 || owner(i, before) != owner(i, after) {
			out = append(out, i)
		}
	}
	return out
}

// sortedCopy returns members sorted, without touching the caller's slice.
func sortedCopy(members []int) []int {
	m := slices.Clone(members)
	slices.Sort(m)
	return m
}

// mix is SplitMix64's finaliser, a cheap bijective 64-bit mix.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
