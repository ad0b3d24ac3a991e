package judge_test

import (
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/judge"
)

func ExampleFindBreakpoint() {
	levels := []int{20, 40, 60, 80}
	p95 := []time.Duration{180 * time.Millisecond, 350 * time.Millisecond, 420 * time.Millisecond, 390 * time.Millisecond}
	b := judge.FindBreakpoint("round_robin", levels, p95, 400*time.Millisecond)
	fmt.Println(b, b.FirstFailure, b.PassesAgain)
	// Output: 40 60 [80]
}
