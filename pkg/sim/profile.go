package sim

import (
	"errors"
	"time"
)

// ErrUnknownProfile is returned for a profile name that is not built in.
var ErrUnknownProfile = errors.New("unknown profile")

// Profile is a named set of plausible engine figures for one model on one
// kind of hardware, with the usual number of replicas.
type Profile struct {
	Name        string
	Description string
	Model       string
	Replicas    int
	Engine      EngineConfig
	// Output is the model's answer lengths.
	Output OutputConfig
	// Frontend is the serving stack's per-request cost outside the engine.
	Frontend FrontendConfig
}

// DocAnswers is the natural-stop answer length of a chat model asked about a
// document: log-normal with a median near 850 tokens, the answers of the
// published Dynamo sweep (docs/simulator.md). Under a max_tokens of 1,024
// it averages about 830.
var DocAnswers = OutputConfig{Mean: 880, Sigma: 0.3, Min: 16, Max: 4096, UntilMaxTokens: true}

// How the figures were derived. docs/simulator.md has the full derivation
// and the calibration of llama-3.1-70b-fp8-h100-tp2 against the published
// Dynamo sweep (make calibrate). Its parameters sit at fixed fractions of
// its hardware's peaks (74% of HBM bandwidth for a step's weight reads, 72%
// of dense FP8 for prefill, 59% for a decoding token's matrix work, 70% of
// bandwidth for attention, 59% of the memory the weights leave as KV
// cache); the other profiles apply the same fractions to their own
// hardware's data sheets and are not calibrated against a measurement.
// TestProfilesFollowTheirHardware recomputes them all.
//
//   - Weights: Llama 3.1 70B in FP8 is about 70 GB, 8B about 8.5 GB.
//   - KV bytes per token: 2 (K,V) x layers x KV heads x head dim x bytes:
//     70B has 80 layers, 8 KV heads, head dim 128 -> 320 KiB in BF16,
//     160 KiB in FP8; 8B has 32 layers: 128 KiB in BF16, 64 KiB in FP8
//     (Llama 3.1 config.json).
//   - Data sheets (NVIDIA): H100 SXM 80 GB at 3.35 TB/s, H200 141 GB at
//     4.8 TB/s, both 989 TFLOPS FP8 dense; L4 24 GB at 300 GB/s, 242
//     TFLOPS FP8 dense.
var profiles = []Profile{
	{
		Name:        "llama-3.1-70b-fp8-h100-tp2",
		Description: "Llama 3.1 70B FP8 on 2x H100 80GB (TP2) with an 8B draft model, TensorRT-LLM behind Dynamo",
		Model:       "meta-llama/Llama-3.1-70B-Instruct-FP8",
		Replicas:    4,
		Engine: EngineConfig{
			// TensorRT-LLM tokens_per_block.
			BlockSize: 32,
			// FP8 KV cache of ~24 GB per GPU x 2 GPUs / 160 KiB per
			// token = ~293k tokens = 9,150 blocks of 32: about 53
			// sequences of the workload's ~5.5k-token mean context.
			NumBlocks: 9150,
			// The deployment's max_batch_size, max_num_tokens and max
			// sequence length.
			MaxBatch:     64,
			MaxNumTokens: 16384,
			MaxModelLen:  16384,
			// 35 GB of weights per GPU / 3.35 TB/s = 10.4 ms at full
			// bandwidth; ~75% of it plus the TP2 all-reduces.
			StepBase: 14 * time.Millisecond,
			// 2 x 70.6e9 FLOP per token / (2 x 989 TFLOPS FP8 dense) =
			// 71 us at peak, plus the 8B draft's prefill (8 us): 79 us
			// at peak, 110 us at ~72% of it. Fitted within that range
			// (docs/simulator.md).
			PrefillPerToken: 110 * time.Microsecond,
			// Verify tokens are batched matrix work like prefill tokens
			// but without the attention over the prompt.
			DecodePerSeq: 120 * time.Microsecond,
			// 1,000 x 160 KiB / 6.7 TB/s = 24 us, at ~70% of bandwidth.
			AttentionPer1K: 35 * time.Microsecond,
			// Draft-target speculative decoding with Llama 3.1 8B FP8.
			DraftTokens: 4,
			Acceptance:  0.65,
			// 4.3 GB per GPU / 3.35 TB/s = 1.3 ms; small passes are
			// bound by kernel launches and the all-reduce.
			DraftStep:   4 * time.Millisecond,
			DraftPerSeq: 40 * time.Microsecond,
			// The draft's own FP8 KV cache, 2 x 32 layers x 8 KV heads
			// x 128 x 1 byte = 64 KiB per token: 1,000 x 64 KiB / 6.7
			// TB/s = 9.8 us per pass, at ~70% of bandwidth.
			DraftAttentionPer1K: 14 * time.Microsecond,
		},
		Output: DocAnswers,
		// Fitted to the published TTFT at low load after the engine's
		// terms (docs/simulator.md).
		Frontend: FrontendConfig{Overhead: 120 * time.Millisecond, OverheadPerToken: 8 * time.Microsecond},
	},
	{
		Name:        "llama-3.1-70b-fp8-h200",
		Description: "Llama 3.1 70B FP8 on 1x H200 141GB, TensorRT-LLM (derived from the H200's data sheet with the calibrated profile's efficiencies; not calibrated; no frontend time, TTFT is the engine's alone)",
		Model:       "meta-llama/Llama-3.1-70B-Instruct-FP8",
		Replicas:    3,
		Engine: EngineConfig{
			BlockSize: 32,
			// 59% of the 71 GB left after the weights holds FP8 KV, as
			// in the reference deployment: 41.9 GB / 160 KiB = 256k
			// tokens = 8,000 blocks of 32.
			NumBlocks:    8000,
			MaxBatch:     256,
			MaxNumTokens: 8192,
			MaxModelLen:  32768,
			// 70 GB / 4.8 TB/s = 14.6 ms at 74% of bandwidth.
			StepBase: 20 * time.Millisecond,
			// 2 x 70.6e9 FLOP / 989 TFLOPS FP8 dense = 143 us at 72%.
			PrefillPerToken: 200 * time.Microsecond,
			// The same FLOP per decoding token at 59%.
			DecodePerSeq: 240 * time.Microsecond,
			// 1,000 x 160 KiB / 4.8 TB/s = 34 us at 70%.
			AttentionPer1K: 49 * time.Microsecond,
		},
		Output: DocAnswers,
	},
	{
		Name:        "llama-3.1-8b-fp8-l4",
		Description: "Llama 3.1 8B FP8 on 1x L4 24GB, vLLM (derived from the L4's data sheet with the calibrated profile's efficiencies; not calibrated; no frontend time, TTFT is the engine's alone)",
		Model:       "meta-llama/Llama-3.1-8B-Instruct-FP8",
		Replicas:    8,
		Engine: EngineConfig{
			BlockSize: 16,
			// 59% of the 15.5 GB left after the weights holds BF16 KV
			// (vLLM's default KV dtype): 9.1 GB / 128 KiB = 70k tokens
			// = 4,350 blocks of 16.
			NumBlocks:    4350,
			MaxBatch:     128,
			MaxNumTokens: 2048,
			MaxModelLen:  16384,
			// 8.5 GB / 300 GB/s = 28 ms at 74% of bandwidth.
			StepBase: 38 * time.Millisecond,
			// 2 x 8.03e9 FLOP / 242 TFLOPS FP8 dense = 66 us at 72%.
			PrefillPerToken: 92 * time.Microsecond,
			// The same FLOP per decoding token at 59%.
			DecodePerSeq: 112 * time.Microsecond,
			// 1,000 x 128 KiB / 300 GB/s = 437 us at 70%.
			AttentionPer1K: 625 * time.Microsecond,
		},
		Output: DocAnswers,
	},
}

// Profiles returns the built-in profiles. The result is a copy.
func Profiles() []Profile {
	return append([]Profile(nil), profiles...)
}

// LookupProfile returns the built-in profile with the given name.
func LookupProfile(name string) (Profile, bool) {
	for _, p := range profiles {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}
