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
}

// How the figures were derived (approximate public numbers; good enough for
// a simulator whose point is relative behaviour, not absolute numbers):
//
//   - Weights: Llama 3.1 70B in FP8 is about 70 GB, 8B about 8.5 GB.
//   - KV bytes per token: 2 (K,V) x layers x KV heads x head dim x 2 bytes
//     (FP16 KV): 70B has 80 layers, 8 KV heads, head dim 128 -> 320 KiB;
//     8B has 32 layers -> 128 KiB (Llama 3.1 config.json).
//   - KV memory: vLLM's gpu_memory_utilization 0.9 minus weights minus a few
//     GB of activations and CUDA graphs.
//   - Decode step at small batch is memory bound: weights / HBM bandwidth
//     (H100 SXM 3.35 TB/s per GPU, H200 4.8 TB/s, L4 300 GB/s; NVIDIA data
//     sheets) plus overhead. Each decoding sequence adds a little compute and
//     reads its own KV (AttentionPer1K = 1,000 x KV bytes per token /
//     bandwidth).
//   - Prefill is compute bound: 2 x params FLOP per token at roughly 35-40%
//     of dense FP8 peak (H100 ~990 TFLOPS per GPU, L4 ~242 TFLOPS); this
//     matches the few thousand tokens/s per replica seen in vLLM and
//     TensorRT-LLM benchmark posts.
//   - MaxBatch and MaxNumTokens follow vLLM V1 defaults for the GPU class
//     (max_num_seqs 256, max_num_batched_tokens 8192 on H100/H200; smaller
//     on L4), block size 16 for vLLM and 32 for TensorRT-LLM.
var profiles = []Profile{
	{
		Name:        "llama-3.1-70b-fp8-h100-tp2",
		Description: "Llama 3.1 70B FP8 on 2x H100 80GB (TP2), vLLM",
		Model:       "meta-llama/Llama-3.1-70B-Instruct-FP8",
		Replicas:    4,
		Engine: EngineConfig{
			BlockSize: 16,
			// 160 GB x 0.9 - 70 GB weights - 8 GB = ~66 GB / 320 KiB
			// = ~200k tokens = 12,500 blocks of 16.
			NumBlocks:    12500,
			MaxBatch:     256,
			MaxNumTokens: 8192,
			MaxModelLen:  32768,
			// 70 GB / 6.7 TB/s = 10.5 ms, plus overhead.
			StepBase: 14 * time.Millisecond,
			// ~6,000 prefill tokens/s per replica.
			PrefillPerToken: 165 * time.Microsecond,
			DecodePerSeq:    80 * time.Microsecond,
			// 1,000 x 320 KiB / 6.7 TB/s.
			AttentionPer1K: 50 * time.Microsecond,
		},
	},
	{
		Name:        "llama-3.1-70b-fp8-h200",
		Description: "Llama 3.1 70B FP8 on 1x H200 141GB, TensorRT-LLM",
		Model:       "meta-llama/Llama-3.1-70B-Instruct-FP8",
		Replicas:    3,
		Engine: EngineConfig{
			BlockSize: 32,
			// 141 GB x 0.9 - 70 GB - 6 GB = ~51 GB / 320 KiB = ~155k
			// tokens = ~4,800 blocks of 32.
			NumBlocks:    4800,
			MaxBatch:     256,
			MaxNumTokens: 8192,
			MaxModelLen:  32768,
			// 70 GB / 4.8 TB/s = 14.6 ms, plus overhead.
			StepBase: 18 * time.Millisecond,
			// ~3,300 prefill tokens/s on one GPU.
			PrefillPerToken: 300 * time.Microsecond,
			DecodePerSeq:    100 * time.Microsecond,
			// 1,000 x 320 KiB / 4.8 TB/s.
			AttentionPer1K: 70 * time.Microsecond,
		},
	},
	{
		Name:        "llama-3.1-8b-fp8-l4",
		Description: "Llama 3.1 8B FP8 on 1x L4 24GB, vLLM",
		Model:       "meta-llama/Llama-3.1-8B-Instruct-FP8",
		Replicas:    8,
		Engine: EngineConfig{
			BlockSize: 16,
			// 24 GB x 0.9 - 8.5 GB - 2 GB = ~11 GB / 128 KiB = ~85k
			// tokens = ~5,300 blocks of 16.
			NumBlocks:    5300,
			MaxBatch:     128,
			MaxNumTokens: 2048,
			MaxModelLen:  16384,
			// 8.5 GB / 300 GB/s = 28 ms.
			StepBase: 30 * time.Millisecond,
			// ~4,000 prefill tokens/s.
			PrefillPerToken: 250 * time.Microsecond,
			DecodePerSeq:    150 * time.Microsecond,
			// 1,000 x 128 KiB / 300 GB/s.
			AttentionPer1K: 430 * time.Microsecond,
		},
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
