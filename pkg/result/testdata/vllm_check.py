# Replays the print statements of vLLM's vllm/benchmarks/serve.py (v0.11-v0.13)
# on the values of <name>.result.golden.json and checks they print the first
# part of <name>.block.golden; also checks json.dumps reproduces the file.
# Usage: python3 vllm_check.py <name> <metric-percentiles>  (run in testdata/)
import json, sys, io, contextlib
name = sys.argv[1]
raw = open(name + ".result.golden.json").read()
r = json.loads(raw)
# json.dump round trip must be byte-identical (key order, separators, float repr)
assert json.dumps(r) == raw, "json.dump layout differs"
out = io.StringIO()
with contextlib.redirect_stdout(out):
    max_concurrency = r["max_concurrency"]
    request_rate = float(r["request_rate"])
    print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print("{:<40} {:<10}".format("Successful requests:", r["completed"]))
    print("{:<40} {:<10}".format("Failed requests:", r["failed"]))
    if max_concurrency is not None:
        print("{:<40} {:<10}".format("Maximum request concurrency:", max_concurrency))
    if request_rate != float("inf"):
        print("{:<40} {:<10.2f}".format("Request rate configured (RPS):", request_rate))
    print("{:<40} {:<10.2f}".format("Benchmark duration (s):", r["duration"]))
    print("{:<40} {:<10}".format("Total input tokens:", r["total_input_tokens"]))
    print("{:<40} {:<10}".format("Total generated tokens:", r["total_output_tokens"]))
    print("{:<40} {:<10.2f}".format("Request throughput (req/s):", r["request_throughput"]))
    print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", r["output_throughput"]))
    print("{:<40} {:<10.2f}".format("Peak output token throughput (tok/s):", r["max_output_tokens_per_s"]))
    print("{:<40} {:<10.2f}".format("Peak concurrent requests:", r["max_concurrent_requests"]))
    print("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", r["total_token_throughput"]))
    ps = [float(p) for p in sys.argv[2].split(",")]
    for key, nm, hdr in [("ttft","TTFT","Time to First Token"),("tpot","TPOT","Time per Output Token (excl. 1st token)"),("itl","ITL","Inter-token Latency"),("e2el","E2EL","End-to-end Latency")]:
        print("{s:{c}^{n}}".format(s=hdr, n=50, c="-"))
        print("{:<40} {:<10.2f}".format(f"Mean {nm} (ms):", r[f"mean_{key}_ms"]))
        print("{:<40} {:<10.2f}".format(f"Median {nm} (ms):", r[f"median_{key}_ms"]))
        for p in ps:
            p_word = str(int(p)) if int(p) == p else str(p)
            print("{:<40} {:<10.2f}".format(f"P{p_word} {nm} (ms):", r[f"p{p_word}_{key}_ms"]))
    print("=" * 50)
py = out.getvalue()
go = open(name + ".block.golden").read()
assert go.startswith(py), "block differs:\n" + py + "\n---\n" + go[:len(py)]
print(name, "OK:", len(py.splitlines()), "vLLM lines identical; json.dumps round-trip identical")
