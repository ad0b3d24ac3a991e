package report

import (
	"math"
	"sort"
)

func sortInts(v []int) { sort.Ints(v) }

// tTable holds the two-sided 95% critical values of Student's t
// distribution (the 0.975 quantile) for 1..30 degrees of freedom.
var tTable = [...]float64{
	12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
}

// tTail continues tTable beyond 30 degrees of freedom.
var tTail = [...]struct{ df, t float64 }{{30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}, {math.Inf(1), 1.960}}

// t975 returns the 0.975 quantile of Student's t with df degrees of freedom
// (df may be fractional, as Welch's are): the table value for whole df up to
// 30, linear in 1/df between table entries otherwise. It returns NaN for
// df < 1.
func t975(df float64) float64 {
	switch {
	case math.IsNaN(df) || df < 1:
		return math.NaN()
	case df <= 30:
		lo := math.Floor(df)
		if lo == df {
			return tTable[int(lo)-1]
		}
		a, b := tTable[int(lo)-1], tTable[int(lo)]
		return interpInv(lo, a, lo+1, b, df)
	}
	for i := 1; i < len(tTail); i++ {
		if df <= tTail[i].df {
			if math.IsInf(tTail[i].df, 1) {
				// 1/df goes to 0 at infinity.
				return tTail[i].t + (tTail[i-1].t-tTail[i].t)*(tTail[i-1].df/df)
			}
			return interpInv(tTail[i-1].df, tTail[i-1].t, tTail[i].df, tTail[i].t, df)
		}
	}
	return 1.960
}

// interpInv interpolates linearly in 1/x between (x0, y0) and (x1, y1).
func interpInv(x0, y0, x1, y1, x float64) float64 {
	f := (1/x0 - 1/x) / (1/x0 - 1/x1)
	return y0 + f*(y1-y0)
}

// spread is the mean and 95% confidence interval of per-run values.
type spread struct {
	N    int
	Mean float64
	// SD is the sample standard deviation (n−1); HalfCI the half-width of
	// the 95% interval, t(0.975, n−1)·SD/√n. Both are NaN for n < 2.
	SD, HalfCI float64
	Min, Max   float64
	Values     []float64
}

// newSpread summarises vs.
func newSpread(vs []float64) spread {
	s := spread{N: len(vs), Values: vs, SD: math.NaN(), HalfCI: math.NaN()}
	if len(vs) == 0 {
		s.Mean = math.NaN()
		return s
	}
	s.Min, s.Max = vs[0], vs[0]
	var sum float64
	for _, v := range vs {
		sum += v
		s.Min = math.Min(s.Min, v)
		s.Max = math.Max(s.Max, v)
	}
	s.Mean = sum / float64(len(vs))
	if len(vs) >= 2 {
		var ss float64
		for _, v := range vs {
			ss += (v - s.Mean) * (v - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(vs)-1))
		s.HalfCI = t975(float64(len(vs)-1)) * s.SD / math.Sqrt(float64(len(vs)))
	}
	return s
}

// welch is the result of Welch's two-sided t-test of two spreads' means.
type welch struct {
	// OK is false when either side has fewer than two runs: the test
	// cannot be made.
	OK bool
	// T is the statistic, DF the Welch–Satterthwaite degrees of freedom,
	// Critical the 5% two-sided critical value.
	T, DF, Critical float64
	// Significant reports |T| > Critical, or, with zero variance on both
	// sides, different means.
	Significant bool
}

// welchTest compares the means of a and b.
func welchTest(a, b spread) welch {
	if a.N < 2 || b.N < 2 {
		return welch{}
	}
	va := a.SD * a.SD / float64(a.N)
	vb := b.SD * b.SD / float64(b.N)
	se := math.Sqrt(va + vb)
	if se == 0 {
		// Identical runs on both sides: any difference is exact.
		return welch{OK: true, Significant: a.Mean != b.Mean, T: math.Inf(1), DF: float64(a.N + b.N - 2)}
	}
	df := (va + vb) * (va + vb) / (va*va/float64(a.N-1) + vb*vb/float64(b.N-1))
	w := welch{OK: true, T: (a.Mean - b.Mean) / se, DF: df, Critical: t975(df)}
	w.Significant = math.Abs(w.T) > w.Critical
	return w
}
