// Package result turns a merged measurement window into the outputs users
// read: vLLM's "Serving Benchmark Result" block, a result.json with vLLM's
// keys, thresholds checked against it, and a per-request JSON Lines log. It
// owns one window's outputs: pkg/record aggregates per-request results into
// the per-window histograms it reads, and pkg/report compares a sweep's
// windows across levels x modes. It must not run load or import the sweep,
// report or coordinator packages.
//
// The block and the JSON follow vLLM's `vllm bench serve`
// (vllm/benchmarks/serve.py, the v0.11–v0.13 line: "Failed requests",
// "Peak output token throughput (tok/s):", "Peak concurrent requests:" and
// the lower-case "Total token throughput (tok/s):"). fleetbench's own
// figures follow the vLLM block in a second, separately ruled block, and in
// result.json under keys vLLM does not use.
//
// Percentiles differ from vLLM's in one documented way: vLLM computes
// numpy.median and numpy.percentile (linear interpolation between the two
// nearest samples) over raw samples; fleetbench reads every percentile,
// the median included, from HDR histograms (hdr.Default: 3 significant
// figures). An HDR percentile is the highest value equivalent to the
// nearest-rank sample: never below it and within 0.1% of it (exact below
// 2,048 µs). Means and standard deviations (population, like numpy.std)
// come from the same histograms.
//
// testdata/vllm_check.py replays vLLM's print statements on the values of
// a golden result.json and checks that they print the golden block, and
// that Python's json.dumps writes the golden file byte for byte.
package result
