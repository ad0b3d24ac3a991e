package calibrate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

// RunSweeps plays the sweep n times, the i-th with the workload seed
// o.Seed+i, and returns each sweep's points and their average per level
// and mode (Average). The publication's table is the average of three
// sweeps, so its cells are compared with an average too. With virtual set
// the sweeps play one after another on sim.Virtual (seconds each);
// otherwise they run at the same time over HTTP, and so do each sweep's
// modes, each on a simulator of its own, so that three sweeps of two
// modes take the wall time of one mode's levels.
func RunSweeps(ctx context.Context, o Options, n int, virtual bool, logger hclog.Logger) (avg []Point, sweeps [][]Point, err error) {
	if n < 1 {
		return nil, nil, fmt.Errorf("run sweeps: %d sweeps, want at least 1", n)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	sweeps = make([][]Point, n)
	if virtual {
		for i := range n {
			so := o
			so.Seed = o.Seed + int64(i)
			if sweeps[i], err = RunVirtual(ctx, so); err != nil {
				return nil, sweeps, fmt.Errorf("sweep %d (seed %d): %w", i+1, so.Seed, err)
			}
		}
		return Average(sweeps), sweeps, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One run per sweep and mode, all at once: each mode's levels play in
	// order on a simulator of its own, as they would one after the other.
	// The first run to fail stops the others and its error is the one
	// returned, not the cancellations it caused.
	runs := make([][][]Point, n)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for i := range n {
		runs[i] = make([][]Point, len(o.Modes))
		for j, m := range o.Modes {
			so := o
			so.Seed, so.Modes = o.Seed+int64(i), []sim.Mode{m}
			wg.Go(func() {
				pts, err := Run(ctx, so, logger.Named(fmt.Sprintf("sweep%d", i+1)).Named(string(m)))
				runs[i][j] = pts
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("sweep %d (seed %d), %s: %w", i+1, so.Seed, m, err)
					}
					mu.Unlock()
					cancel()
				}
			})
		}
	}
	wg.Wait()
	for i := range n {
		for _, pts := range runs[i] {
			sweeps[i] = append(sweeps[i], pts...)
		}
	}
	if first != nil {
		return nil, sweeps, first
	}
	return Average(sweeps), sweeps, nil
}

// Average is, per mode and level, the mean of each figure over the
// sweeps that measured it, as the publication averaged its three sweeps'
// percentiles, hit rates and rates; Requests and Failed are summed. The
// points come out in the order of their first appearance.
func Average(sweeps [][]Point) []Point {
	type key struct {
		mode     sim.Mode
		sessions int
	}
	type sum struct {
		p                         Point
		p50, p95, hit, rps, mo, n float64
	}
	var order []key
	sums := map[key]*sum{}
	for _, pts := range sweeps {
		for _, p := range pts {
			k := key{p.Mode, p.Sessions}
			s, ok := sums[k]
			if !ok {
				s = &sum{p: Point{Mode: p.Mode, Sessions: p.Sessions}}
				sums[k] = s
				order = append(order, k)
			}
			s.p.Requests += p.Requests
			s.p.Failed += p.Failed
			s.p50 += float64(p.TTFTP50)
			s.p95 += float64(p.TTFTP95)
			s.hit += p.HitRate
			s.rps += p.RPS
			s.mo += p.MeanOutput
			s.n++
		}
	}
	out := make([]Point, 0, len(order))
	for _, k := range order {
		s := sums[k]
		p := s.p
		p.TTFTP50 = time.Duration(s.p50 / s.n)
		p.TTFTP95 = time.Duration(s.p95 / s.n)
		p.HitRate, p.RPS, p.MeanOutput = s.hit/s.n, s.rps/s.n, s.mo/s.n
		out = append(out, p)
	}
	return out
}
