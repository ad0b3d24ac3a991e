package coordinator

import (
	"slices"
	"time"

	"github.com/fleetbench/fleetbench/pkg/shard"
)

// assignmentFor builds m's assignment in the current stage.
func (r *run) assignmentFor(m *member, restart []int, takeOvers ...takeOver) assignment {
	members := make([]int, 0, len(r.byIndex))
	for i := range r.byIndex {
		members = append(members, i)
	}
	slices.Sort(members)
	rate := 0.0
	if r.st.stage.RequestRate > 0 {
		shares := make([]int, 0, len(members))
		pos := 0
		for k, i := range members {
			shares = append(shares, r.byIndex[i].share)
			if i == m.index {
				pos = k
			}
		}
		rate = shard.SplitRate(r.st.stage.RequestRate, shares)[pos]
	}
	return assignment{
		Epoch: r.epoch, Stage: r.st.idx, Index: m.index, Members: members, Spec: r.cfg.Spec,
		Concurrency: m.share, Level: r.level, Rate: rate, Mode: r.st.stage.Mode,
		Restart: restart, Limit: r.st.stage.Conversations, TakeOver: takeOvers,
	}
}

// reshard recomputes shares over the live members and sends each its
// assignment; restarts maps an agent index to conversations it must start
// again, and takeOvers names members just lost with their cursors.
func (r *run) reshard(restarts map[int][]int, now time.Time, takeOvers ...takeOver) {
	if r.st == nil {
		return
	}
	live := r.live()
	caps := make([]int, len(live))
	for i, m := range live {
		caps[i] = m.capacity
	}
	level := r.level
	if r.st.stage.RequestRate > 0 && level == 0 {
		level = 0
	}
	shares, err := shard.Split(level, caps)
	if err != nil {
		r.logger.Warn("split level over capacities failed, splitting evenly", "level", level, "error", err)
		shares, _ = shard.Split(level, make([]int, len(live)))
	}
	r.epoch++
	for i, m := range live {
		// The new assignment may hand m more conversations: it has
		// finished only once a watermark of this epoch says so.
		m.share, m.finished = shares[i], false
	}
	for _, m := range live {
		if m.conn != nil {
			m.conn.send(r.assignmentFor(m, restarts[m.index], takeOvers...))
		}
	}
	r.logger.Debug("resharded", "epoch", r.epoch, "members", len(live), "level", level, "shares", shares)
}
