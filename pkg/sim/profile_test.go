package sim

import (
	"math"
	"testing"
	"time"
)

// Efficiencies of the calibrated profile (llama-3.1-70b-fp8-h100-tp2)
// against its hardware's peaks, which the other profiles reuse
// (docs/simulator.md): a step's weight reads reach 74% of HBM bandwidth
// with launches and the all-reduces, prefill 72% of dense FP8 peak, a
// decoding token's matrix work 59%, attention's KV reads 70% of bandwidth,
// and the KV cache gets 59% of the memory the weights leave (24 GB of 40.7
// GB per GPU in the reference deployment).
const (
	effWeights   = 0.74
	effPrefill   = 0.72
	effDecode    = 0.59
	effAttention = 0.70
	kvShare      = 0.59
)

// TestProfilesFollowTheirHardware recomputes each profile's physical
// parameters from its hardware's data-sheet figures and its model's shape
// with the efficiencies above, and checks the profile within 5%: the
// uncalibrated profiles are the calibrated one's method applied to other
// hardware, not numbers of their own.
func TestProfilesFollowTheirHardware(t *testing.T) {
	const (
		GB  = 1e9
		KiB = 1024
	)
	for _, tc := range []struct {
		profile string
		gpus    float64 // tensor-parallel GPUs per replica
		hbm     float64 // bytes per GPU
		bw      float64 // HBM bytes/s per GPU
		fp8     float64 // dense FP8 FLOP/s per GPU
		params  float64 // target model parameters
		weights float64 // bytes of weights, all GPUs
		draft   float64 // draft model parameters (prefilled too)
		other   float64 // other bytes per GPU before KV (the draft's weights)
		kvTok   float64 // KV bytes per token
	}{
		// H100 SXM: 80 GB HBM3 at 3.35 TB/s, 989 TFLOPS FP8 dense.
		{"llama-3.1-70b-fp8-h100-tp2", 2, 80 * GB, 3.35e12, 989e12, 70.6e9, 70 * GB, 8.03e9, 4.3 * GB, 160 * KiB},
		// H200: 141 GB HBM3e at 4.8 TB/s, 989 TFLOPS FP8 dense.
		{"llama-3.1-70b-fp8-h200", 1, 141 * GB, 4.8e12, 989e12, 70.6e9, 70 * GB, 0, 0, 160 * KiB},
		// L4: 24 GB GDDR6 at 300 GB/s, 242 TFLOPS FP8 dense; BF16 KV.
		{"llama-3.1-8b-fp8-l4", 1, 24 * GB, 300e9, 242e12, 8.03e9, 8.5 * GB, 0, 0, 128 * KiB},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			p, ok := LookupProfile(tc.profile)
			if !ok {
				t.Fatalf("no profile %s", tc.profile)
			}
			e := p.Engine
			sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
			kvBytes := kvShare * (tc.hbm - tc.weights/tc.gpus - tc.other) * tc.gpus
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"StepBase", float64(e.StepBase), float64(sec(tc.weights / tc.gpus / tc.bw / effWeights))},
				{"PrefillPerToken", float64(e.PrefillPerToken), float64(sec(2 * (tc.params + tc.draft) / (tc.gpus * tc.fp8) / effPrefill))},
				{"DecodePerSeq", float64(e.DecodePerSeq), float64(sec(2 * tc.params / (tc.gpus * tc.fp8) / effDecode))},
				{"AttentionPer1K", float64(e.AttentionPer1K), float64(sec(1000 * tc.kvTok / (tc.gpus * tc.bw) / effAttention))},
				{"NumBlocks", float64(e.NumBlocks), kvBytes / tc.kvTok / float64(e.BlockSize)},
			} {
				t.Logf("%-16s profile %.4g, from the hardware %.4g", c.name, c.got, c.want)
				if math.Abs(c.got-c.want) > 0.05*c.want {
					t.Errorf("%s: profile %.4g, the hardware gives %.4g (want within 5%%)", c.name, c.got, c.want)
				}
			}
		})
	}
}
