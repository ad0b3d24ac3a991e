package load_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// twoTurns is a workload of two-turn conversations.
type twoTurns struct{}

func (twoTurns) Name() string                             { return "example" }
func (twoTurns) Conversation(i int) workload.Conversation { return conv(i) }

type conv int

func (c conv) Index() int     { return int(c) }
func (c conv) System() string { return "" }
func (c conv) Turns() int     { return 2 }
func (c conv) Next(_ context.Context, k int, _ []openai.Message) (workload.Turn, error) {
	return workload.Turn{User: fmt.Sprintf("question %d", k)}, nil
}

// A closed loop of 4 sessions with a budget of 10 turns. In a real run the
// Streamer is a *client.Client; here every reply takes 10 ms.
func Example() {
	streamer := load.StreamerFunc(func(ctx context.Context, req *client.Request) *client.Result {
		res := &client.Result{Start: time.Now()}
		time.Sleep(10 * time.Millisecond)
		res.TTFT, res.E2E, res.Text, res.OutputTokens = 5*time.Millisecond, time.Since(res.Start), "answer", 1
		return res
	})
	rec := record.NewRecorder(hdr.Default)
	e, err := load.New(load.Config{Concurrency: 4, TotalRequests: 10}, twoTurns{}, streamer, rec, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := e.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	w, _ := e.Watermark()
	for _, win := range rec.Drain() {
		fmt.Printf("window %d: %d requests, %d failed\n", win.ID, win.Counters.Requests, win.Counters.Failed)
	}
	fmt.Println("watermark:", w)
	// Output:
	// window 0: 10 requests, 0 failed
	// watermark: 0
}
