package workload

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestParseThinkTime(t *testing.T) {
	tests := []struct {
		in      string
		want    ThinkTime
		wantErr bool
	}{
		{"", ThinkTime{}, false},
		{"none", ThinkTime{}, false},
		{"NONE", ThinkTime{}, false},
		{"0s", ThinkTime{}, false},
		{"2s", ThinkTime{Kind: ThinkFixed, Mean: 2 * time.Second}, false},
		{"fixed:150ms", ThinkTime{Kind: ThinkFixed, Mean: 150 * time.Millisecond}, false},
		{"exp:2s", ThinkTime{Kind: ThinkExp, Mean: 2 * time.Second}, false},
		{"exp:0s", ThinkTime{}, false},
		{"-1s", ThinkTime{}, true},
		{"exp:", ThinkTime{}, true},
		{"sometimes", ThinkTime{}, true},
		{"2", ThinkTime{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseThinkTime(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrThinkTime) {
					t.Fatalf("err = %v, want ErrThinkTime", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %+v, %v; want %+v", got, err, tt.want)
			}
			back, err := ParseThinkTime(got.String())
			if err != nil || back != got {
				t.Errorf("round trip of %q: %+v, %v", got.String(), back, err)
			}
		})
	}
}

func TestThinkTimeAt(t *testing.T) {
	fixed := ThinkTime{Kind: ThinkFixed, Mean: time.Second}
	exp := ThinkTime{Kind: ThinkExp, Mean: 2 * time.Second}
	if d := fixed.At(1, 0, 0); d != 0 {
		t.Errorf("first turn waits %v", d)
	}
	if d := exp.At(1, 5, 0); d != 0 {
		t.Errorf("first turn waits %v", d)
	}
	if d := fixed.At(1, 3, 2); d != time.Second {
		t.Errorf("fixed = %v", d)
	}
	if d := (ThinkTime{}).At(1, 3, 2); d != 0 {
		t.Errorf("none = %v", d)
	}
	if a, b := exp.At(7, 3, 2), exp.At(7, 3, 2); a != b {
		t.Errorf("not deterministic: %v vs %v", a, b)
	}
	if a, b := exp.At(7, 3, 2), exp.At(8, 3, 2); a == b {
		t.Errorf("seed has no effect: %v", a)
	}
}

// TestThinkTimeExpDistribution checks the mean and the spread of
// exponential draws across conversations and turns: for an exponential the
// standard deviation equals the mean and P(X > mean) = 1/e.
func TestThinkTimeExpDistribution(t *testing.T) {
	exp := ThinkTime{Kind: ThinkExp, Mean: 2 * time.Second}
	const n = 20000
	var sum, sumSq float64
	over := 0
	for i := range n {
		d := exp.At(42, i/4, i%4+1).Seconds()
		sum += d
		sumSq += d * d
		if d > 2 {
			over++
		}
	}
	mean := sum / n
	sd := math.Sqrt(sumSq/n - mean*mean)
	// The standard error of the mean is 2s/sqrt(20000) = 0.014s; allow 4.
	if math.Abs(mean-2) > 0.06 {
		t.Errorf("mean = %.3fs, want 2s", mean)
	}
	if math.Abs(sd-2) > 0.15 {
		t.Errorf("sd = %.3fs, want about 2s", sd)
	}
	if p := float64(over) / n; math.Abs(p-1/math.E) > 0.015 {
		t.Errorf("P(X > mean) = %.3f, want %.3f", p, 1/math.E)
	}
}

func TestThinkTimeFlag(t *testing.T) {
	var tt ThinkTime
	if err := tt.Set("exp:500ms"); err != nil || tt.String() != "exp:500ms" {
		t.Fatalf("Set: %v, %s", err, tt)
	}
	if err := tt.UnmarshalText([]byte("bogus")); err == nil {
		t.Fatal("UnmarshalText accepted bogus")
	}
}
