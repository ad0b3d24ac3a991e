package shard

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestOwnerIsDeterministicAndBalanced(t *testing.T) {
	for _, n := range []int{1, 3, 8} {
		members := Members(n)
		counts := make([]int, n)
		const convs = 30000
		for i := range convs {
			o, err := Owner(i, members)
			if err != nil {
				t.Fatal(err)
			}
			// Every agent computes the same owner from its own view.
			owners := 0
			for _, self := range members {
				if Owns(i, self, members) {
					owners++
				}
			}
			if owners != 1 {
				t.Fatalf("n=%d conv %d: %d agents claim it", n, i, owners)
			}
			counts[o]++
		}
		for m, c := range counts {
			want := convs / n
			if c < want*9/10 || c > want*11/10 {
				t.Errorf("n=%d: agent %d owns %d conversations, want about %d", n, m, c, want)
			}
		}
	}
}

func TestOwnerNoMembers(t *testing.T) {
	if _, err := Owner(1, nil); !errors.Is(err, ErrNoMembers) {
		t.Fatalf("Owner(nil) error = %v, want ErrNoMembers", err)
	}
}

func TestMembershipChangeMovesOnlyWhatItMust(t *testing.T) {
	const n = 20000
	tests := []struct {
		name          string
		before, after []int
		// every moved conversation must satisfy this
		check func(t *testing.T, i int, before, after []int)
	}{
		{"agent 2 of 4 lost", []int{0, 1, 2, 3}, []int{0, 1, 3}, func(t *testing.T, i int, before, after []int) {
			if o, _ := Owner(i, before); o != 2 {
				t.Errorf("conversation %d moved from surviving agent %d", i, o)
			}
		}},
		{"agent 4 joins", []int{0, 1, 2, 3}, []int{0, 1, 2, 3, 4}, func(t *testing.T, i int, before, after []int) {
			if o, _ := Owner(i, after); o != 4 {
				t.Errorf("conversation %d moved to old agent %d", i, o)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			moved := Moved(n, tc.before, tc.after)
			for _, i := range moved {
				tc.check(t, i, tc.before, tc.after)
			}
			// About 1/4 or 1/5 of the conversations, never more than 30%.
			if len(moved) == 0 || len(moved) > n*3/10 {
				t.Errorf("moved %d of %d conversations", len(moved), n)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name     string
		level    int
		capacity []int
		want     []int
		err      error
	}{
		{"even", 9, []int{0, 0, 0}, []int{3, 3, 3}, nil},
		{"remainder to the first", 10, []int{0, 0, 0}, []int{4, 3, 3}, nil},
		{"level below agents", 2, []int{0, 0, 0}, []int{1, 1, 0}, nil},
		{"capped agent", 10, []int{2, 0, 0}, []int{2, 4, 4}, nil},
		{"capped exactly", 6, []int{2, 2, 2}, []int{2, 2, 2}, nil},
		{"over capacity", 7, []int{2, 2, 2}, nil, ErrCapacity},
		{"no agents", 1, nil, nil, ErrNoMembers},
		{"zero level", 0, []int{0, 0}, []int{0, 0}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Split(tc.level, tc.capacity)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Split error = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Split(%d, %v) = %v, want %v", tc.level, tc.capacity, got, tc.want)
			}
		})
	}
}

func TestSplitSumsToLevel(t *testing.T) {
	for level := range 200 {
		for n := 1; n <= 9; n++ {
			caps := make([]int, n)
			for i := range caps {
				if i%3 == 1 {
					caps[i] = 5
				}
			}
			got, err := Split(level, caps)
			if err != nil {
				t.Fatal(err)
			}
			sum := 0
			for i, s := range got {
				sum += s
				if caps[i] != 0 && s > caps[i] {
					t.Fatalf("level %d: share %d over capacity %d", level, s, caps[i])
				}
			}
			if sum != level {
				t.Fatalf("Split(%d, %v) = %v sums to %d", level, caps, got, sum)
			}
		}
	}
}

func TestIndexersPartitionAFixedSet(t *testing.T) {
	const limit = 1000
	members := Members(3)
	seen := make(map[int]int)
	for _, self := range members {
		x := NewIndexer(self, members, limit)
		prev := -1
		for {
			i, ok := x.Next()
			if !ok {
				break
			}
			if i <= prev {
				t.Fatalf("agent %d: index %d after %d", self, i, prev)
			}
			prev = i
			seen[i]++
		}
	}
	if len(seen) != limit {
		t.Fatalf("indexers cover %d conversations, want %d", len(seen), limit)
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("conversation %d handed out %d times", i, c)
		}
	}
}

func TestIndexerRestartAndReshard(t *testing.T) {
	x := NewIndexer(0, []int{0, 1}, 0)
	x.Restart([]int{7, 7, 9})
	for _, want := range []int{7, 9} {
		if got, _ := x.Next(); got != want {
			t.Fatalf("Next = %d, want restart %d", got, want)
		}
	}
	if !x.Restarted(7) || x.Restarted(8) {
		t.Fatal("Restarted reports the wrong conversations")
	}
	x.SetMembers([]int{0})
	for want := range 5 { // sole owner now: every index in order
		if got, _ := x.Next(); got < want {
			t.Fatalf("Next after reshard = %d", got)
		}
	}
}

func TestIndexerConcurrent(t *testing.T) {
	x := NewIndexer(0, []int{0}, 10000)
	var mu sync.Mutex
	seen := make(map[int]bool)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i, ok := x.Next()
				if !ok {
					return
				}
				mu.Lock()
				if seen[i] {
					t.Errorf("index %d twice", i)
				}
				seen[i] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 10000 {
		t.Fatalf("got %d indices", len(seen))
	}
}

// TestTakeOverLeavesNothingUnrun plays a fixed set of conversations over
// three members; member 2 is lost after handing out indices up to its
// cursor. The survivors' restarts plus what they hand out afterwards run
// every index member 2 had not started before its cursor, and nothing of
// its own twice.
func TestTakeOverLeavesNothingUnrun(t *testing.T) {
	const limit = 300
	members := []int{0, 1, 2}
	ixs := []*Indexer{NewIndexer(0, members, limit), NewIndexer(1, members, limit), NewIndexer(2, members, limit)}
	run := map[int]int{}
	// Survivors race ahead of the lost member's last report.
	for range 60 {
		for _, x := range ixs[:2] {
			if i, ok := x.Next(); ok {
				run[i]++
			}
		}
	}
	for range 20 {
		i, _ := ixs[2].Next()
		run[i]++
	}
	cursor := ixs[2].Cursor()
	// It starts more after its last report, then is lost: those are gone.
	for range 5 {
		ixs[2].Next()
	}
	queued := 0
	for _, x := range ixs[:2] {
		x.SetMembers([]int{0, 1})
		queued += x.TakeOver(2, cursor)
	}
	if queued == 0 {
		t.Fatal("nothing taken over, but the survivors had passed the lost member's cursor")
	}
	restarted := 0
	for _, x := range ixs[:2] {
		for {
			i, ok := x.Next()
			if !ok {
				break
			}
			if x.Restarted(i) {
				restarted++
			}
			run[i]++
		}
	}
	for i := range limit {
		if run[i] < 1 {
			t.Errorf("conversation %d never ran to completion", i)
		}
		if run[i] > 1 {
			t.Errorf("conversation %d ran %d times", i, run[i])
		}
	}
	if restarted != queued {
		t.Errorf("%d restarted conversations handed out, %d queued", restarted, queued)
	}
}
