package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// serverSection renders the server-side section of s.
func serverSection(t *testing.T, s *Sweep) string {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	var b md
	analyze(s).writeServer(&b)
	return b.String()
}

// TestHitRateComparisonSides never claims the client- and server-side hit
// rates agree at a point where one side was not measured: it says the
// comparison was not made, and why.
func TestHitRateComparisonSides(t *testing.T) {
	for _, tc := range []struct {
		name string
		// server returns the server-side hit rate of point i (nil: n/a).
		server  func(i int, client float64) *float64
		want    []string
		notWant []string
	}{
		{
			name:    "every server figure n/a",
			server:  func(int, float64) *float64 { return nil },
			want:    []string{"were not compared: the server-side hit rate was not measured at any point", "server_missing"},
			notWant: []string{"agree within"},
		},
		{
			name:    "both sides everywhere",
			server:  func(_ int, c float64) *float64 { return fptr(c) },
			want:    []string{"agree within 3 points at every point."},
			notWant: []string{"not compared"},
		},
		{
			name: "server side at some points",
			server: func(i int, c float64) *float64 {
				if i%2 == 0 {
					return nil
				}
				return fptr(c)
			},
			want:    []string{"agree within 3 points at the 8 of 16 points where both were measured; the others were not compared: the server-side hit rate was not measured at 8 of 16 points"},
			notWant: []string{"at every point"},
		},
		{
			name: "a disagreement and points not compared",
			server: func(i int, c float64) *float64 {
				switch i {
				case 0:
					return fptr(0.99)
				case 1, 2:
					return nil
				}
				return fptr(c)
			},
			want:    []string{"other traffic", "The other points were not compared: the server-side hit rate was not measured at run 1, round_robin at 40; run 1, round_robin at 60 (no prefix-cache metric"},
			notWant: []string{"agree within"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := goldenSweep()
			for i := range s.Points {
				p := &s.Points[i]
				p.Server = &servermetrics.Window{
					Total: servermetrics.Figures{HitRate: tc.server(i, p.Window.HitRate()), QueueMean: fptr(1)},
				}
			}
			out := serverSection(t, s)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("server section lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("server section says %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestNoiseLineMissingMode says a level one mode has no run at was not
// compared, instead of leaving it out.
func TestNoiseLineMissingMode(t *testing.T) {
	s := goldenSweep()
	kept := s.Points[:0]
	for _, p := range s.Points {
		if p.Mode != "kv" || p.Level != 80 {
			kept = append(kept, p)
		}
	}
	s.Points = kept
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(analyze(s).noiseLines(), "\n")
	if !strings.Contains(got, "At 80 sessions: not compared, kv has no run at this level.") {
		t.Errorf("noise lines lack the level not compared:\n%s", got)
	}
	if !strings.Contains(got, "At 60 sessions the TTFT p95 difference") {
		t.Errorf("noise lines lack a compared level:\n%s", got)
	}
}

// TestAnswerLines warns at the points where most answers stopped early,
// says once how to get the intended lengths, and says the asked worker
// header was never seen.
func TestAnswerLines(t *testing.T) {
	s := goldenSweep()
	s.WorkerHeader = "X-Servd-By"
	for i := range s.Points {
		p := &s.Points[i]
		p.Window.Counters.WorkerHeaders = map[string]int64{"X-Fleetbench-Worker": p.Window.Counters.Requests}
		if p.Mode == "kv" && p.Level == 20 && p.Run == 1 {
			p.Window.Counters.FinishReasons = map[string]int64{"stop": 85, "length": 15}
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	got := analyze(s).answerLines()
	want := []string{
		`Warning: run 1, kv at 20 sessions: 85% of answers ended with finish_reason "stop" before their max_tokens (stop 85, length 15): shorter than the workload asked for.`,
		"To get the intended answer lengths (unless --natural-stop was meant), " + result.IgnoreEOSHint + ".",
		"Warning: --worker-header X-Servd-By was never seen at 16 of 16 points (first, run 1, round_robin at 20 sessions: --worker-header X-Servd-By was never seen in 100 successful responses; workers were named by X-Fleetbench-Worker (100 responses)).",
	}
	if !slices.Equal(got, want) {
		t.Errorf("answer lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var b md
	analyze(s).writeFinishReasons(&b)
	if !strings.Contains(b.String(), "| kv | 20 | stop 85, length 115 |") {
		t.Errorf("finish reasons table:\n%s", b.String())
	}
}

// TestNoParagraphTwice renders report.md for a sweep whose fallback
// applies (and for the golden sweep) and finds no paragraph or list item
// printed twice, bold or not.
func TestNoParagraphTwice(t *testing.T) {
	fallback := &Sweep{ID: "x", Modes: []string{"round_robin", "kv"}}
	for i, l := range []int{20, 40, 60} {
		fallback.Points = append(fallback.Points,
			rowPoint(1, "round_robin", l, []float64{420, 440, 500}[i]),
			rowPoint(1, "kv", l, []float64{200, 300, 430}[i]))
	}
	for name, s := range map[string]*Sweep{"fallback": fallback, "golden": goldenSweep()} {
		t.Run(name, func(t *testing.T) {
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			a := analyze(s)
			if name == "fallback" && a.fallback == nil {
				t.Fatal("the fallback does not apply")
			}
			var b md
			a.writeMarkdown(&b, nil, t.TempDir())
			seen := map[string]bool{}
			for _, line := range strings.Split(b.String(), "\n") {
				p := strings.Trim(strings.TrimPrefix(line, "- "), "*")
				if p == "" || strings.HasPrefix(p, "|") || strings.HasPrefix(p, "#") {
					continue
				}
				if seen[p] {
					t.Errorf("printed twice: %q", p)
				}
				seen[p] = true
			}
		})
	}
}
