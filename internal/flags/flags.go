package flags

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Help groups, in the order help prints them.
const (
	GroupTarget     = "Target"
	GroupWorkload   = "Workload"
	GroupLoad       = "Load"
	GroupOutput     = "Output"
	GroupFleet      = "Fleet"
	GroupKubernetes = "Kubernetes"
	GroupSimulator  = "Simulator"
	GroupSweep      = "Sweep"
	GroupReadiness  = "Readiness"
	GroupSwitch     = "Mode switch"
	GroupOther      = "Other"
)

// Groups lists the help groups in print order.
var Groups = []string{
	GroupTarget, GroupWorkload, GroupLoad, GroupOutput, GroupFleet, GroupKubernetes,
	GroupSimulator, GroupSweep, GroupSwitch, GroupReadiness, GroupOther,
}

// groupAnnotation is the pflag annotation key holding a flag's group.
const groupAnnotation = "fleetbench_group"

// Group puts the named flags of fs in a help group. Unknown names panic:
// they are programming errors.
func Group(fs *pflag.FlagSet, group string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, groupAnnotation, []string{group}); err != nil {
			panic(fmt.Sprintf("flags: group %s: %v", n, err))
		}
	}
}

// GroupOf returns the help group of f (GroupOther when it has none).
func GroupOf(f *pflag.Flag) string {
	if g := f.Annotations[groupAnnotation]; len(g) > 0 {
		return g[0]
	}
	return GroupOther
}

// Alias registers old as a hidden, deprecated name of the flag name: it
// sets the same value and prints a one-line notice when used.
func Alias(fs *pflag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("flags: alias of unknown flag " + name)
	}
	fs.AddFlag(&pflag.Flag{
		Name: old, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal,
		Annotations: f.Annotations,
	})
	_ = fs.MarkDeprecated(old, "use --"+name+" instead")
}

// Target registers the target's flags: --target, --model, --endpoint and
// --api-key-env, bound to the given fields. Their current values are the
// defaults shown.
func Target(fs *pflag.FlagSet, target, model, endpoint, apiKeyEnv *string) {
	fs.StringVar(target, "target", *target, "base URL of the OpenAI-compatible server (empty: the built-in simulator, in-process)")
	fs.StringVar(model, "model", *model, "model name to request (default with the simulator: the profile's model)")
	fs.StringVar(endpoint, "endpoint", *endpoint, "endpoint: chat or completions")
	fs.StringVar(apiKeyEnv, "api-key-env", *apiKeyEnv, "environment variable holding the API key, sent as a bearer token (unset or empty: no key)")
	Group(fs, GroupTarget, "target", "model", "endpoint", "api-key-env")
}

// WorkerHeader registers --worker-header, bound to name: the response
// header naming the serving worker, tried before client.DefaultWorkerHeaders.
func WorkerHeader(fs *pflag.FlagSet, name *string) {
	fs.StringVar(name, "worker-header", *name, "response header naming the worker that served a request, tried before the simulator's X-Fleetbench-Worker and llm-d's X-Inference-Pod; gives requests and prompt tokens per worker and the worker skew")
	Group(fs, GroupTarget, "worker-header")
}

// Preflight registers --skip-preflight, bound to skip.
func Preflight(fs *pflag.FlagSet, skip *bool) {
	fs.BoolVar(skip, "skip-preflight", *skip, "do not check the target (reachable, model listed, key accepted, one streamed completion) before the load")
	Group(fs, GroupTarget, "skip-preflight")
}

// Thresholds registers --threshold (repeatable), the pass/fail criteria
// checked on each result (result.ParseThreshold); exitCode is the exit
// code a failed one gives, for the help text.
func Thresholds(fs *pflag.FlagSet, ths *[]string, exitCode int) {
	fs.StringArrayVar(ths, "threshold", *ths, fmt.Sprintf("pass/fail criterion checked on each result, e.g. 'ttft_p95<400ms', 'error_rate<1%%', 'goodput>5'; a failed one exits %d (repeatable)", exitCode))
	Group(fs, GroupOutput, "threshold")
}

// Defaults of the target settings.
const (
	DefaultEndpoint  = client.EndpointChat
	DefaultAPIKeyEnv = client.DefaultAPIKeyEnv
)

// Workload registers the workload's flags bound to w; w's current values
// (normally workload.Default()) are the defaults shown.
func Workload(fs *pflag.FlagSet, w *workload.Config) {
	fs.StringVar(&w.Kind, "workload", w.Kind, "workload: docchat, sharegpt or jsonl")
	fs.StringVar(&w.Dataset, "dataset", w.Dataset, "dataset file (sharegpt, jsonl) or documents directory (docchat)")
	fs.Int64Var(&w.Seed, "seed", w.Seed, "seed of the conversations, arrivals and session ids")
	fs.IntVar(&w.MaxTokens, "max-tokens", w.MaxTokens, "max_tokens of each turn unless the workload sets one (0: the server's limit)")
	fs.Var(&w.Think, "think-time", "pause before each later turn: none, a duration (2s) or exp:MEAN")
	fs.Lookup("think-time").DefValue = w.Think.String()
	fs.Var(&w.Turns, "turns", "user turns per conversation: N or MIN-MAX (default: docchat 3-5, sharegpt every turn; sharegpt takes MAX as a cap)")
	fs.StringVar(&w.SessionHeader, "session-header", w.SessionHeader, "request header carrying a per-conversation session id, e.g. X-Session-ID")
	fs.IntVar(&w.PromptTokens, "prompt-tokens", w.PromptTokens, "docchat: first prompt size in tokens")
	fs.IntVar(&w.Documents, "documents", w.Documents, "docchat: number of starter documents")
	fs.BoolVar(&w.NaturalStop, "natural-stop", w.NaturalStop, "docchat: send only max_tokens as a cap and let the model stop (default: answers of the published lengths)")
	fs.IntVar(&w.MaxConversations, "max-conversations", w.MaxConversations, "sharegpt: keep at most N conversations (0: all)")
	fs.IntVar(&w.MinMessages, "min-messages", w.MinMessages, "sharegpt: drop conversations with fewer messages")
	fs.BoolVar(&w.Shuffle, "shuffle", w.Shuffle, "sharegpt: shuffle the conversations with the seed")
	fs.BoolVar(&w.OutputLen, "output-len", w.OutputLen, "sharegpt: cap each turn's output at the dataset's answer length")
	um := &userModelValue{w: w}
	fs.Var(&userModelField{um, "url"}, "user-model-url", "docchat: base URL of a model that writes the follow-up questions")
	fs.Var(&userModelField{um, "model"}, "user-model", "docchat: the user model's name")
	fs.Var(&userModelField{um, "key"}, "user-model-key-env", "docchat: environment variable holding the user model's API key")
	Group(fs, GroupWorkload, "workload", "dataset", "seed", "max-tokens", "think-time", "turns", "session-header",
		"prompt-tokens", "documents", "natural-stop", "max-conversations", "min-messages", "shuffle", "output-len",
		"user-model-url", "user-model", "user-model-key-env")
}

// userModelValue creates the workload's user model on first use, so the
// three user-model flags fill one UserModelConfig.
type userModelValue struct{ w *workload.Config }

func (u *userModelValue) get() *workload.UserModelConfig {
	if u.w.UserModel == nil {
		u.w.UserModel = &workload.UserModelConfig{}
	}
	return u.w.UserModel
}

// userModelField is one user-model flag.
type userModelField struct {
	u     *userModelValue
	field string
}

func (f *userModelField) String() string {
	um := f.u.w.UserModel
	if um == nil {
		return ""
	}
	switch f.field {
	case "url":
		return um.URL
	case "model":
		return um.Model
	default:
		return um.APIKeyEnv
	}
}

func (f *userModelField) Set(v string) error {
	um := f.u.get()
	switch f.field {
	case "url":
		um.URL = v
	case "model":
		um.Model = v
	default:
		um.APIKeyEnv = v
	}
	return nil
}

func (f *userModelField) Type() string { return "string" }

// Load is the load settings that `run`, `coordinator` and `sweep` share.
// Concurrency holds one level for `run` and a list for the others.
type Load struct {
	// Concurrency is the closed loop's concurrent sessions per level, or
	// with RequestRate the cap on conversations in flight.
	Concurrency *[]int
	// RequestRate, when positive, makes the load an open loop.
	RequestRate *float64
	// Warmup runs before every measurement and is left out of results.
	Warmup *time.Duration
	// Duration is the measured time of every level.
	Duration *time.Duration
	// Cooldown is an idle pause between levels (nil: not registered).
	Cooldown *time.Duration
}

// Defaults of the load settings, from the published studies fleetbench
// reproduces (60 s warm-up, 300 s windows, a pause between levels).
const (
	DefaultWarmup   = load.DefaultWarmup
	DefaultDuration = load.DefaultDuration
	DefaultCooldown = load.DefaultCooldown
)

// AddLoad registers the load flags bound to l's fields; their current
// values are the defaults shown.
func AddLoad(fs *pflag.FlagSet, l Load) {
	fs.Var(&intList{l.Concurrency}, "concurrency", "concurrent sessions (closed loop); a comma list runs one level each, e.g. 20,40,80")
	fs.Float64Var(l.RequestRate, "request-rate", *l.RequestRate, "open loop: mean conversation arrivals per second (0: closed loop; --concurrency then caps conversations in flight)")
	fs.DurationVar(l.Warmup, "warmup", *l.Warmup, "warm-up before every measurement; its turns are discarded, its sessions go on")
	fs.DurationVar(l.Duration, "duration", *l.Duration, "measured time of every level")
	names := []string{"concurrency", "request-rate", "warmup", "duration"}
	if l.Cooldown != nil {
		fs.DurationVar(l.Cooldown, "cooldown", *l.Cooldown, "idle pause after every level")
		names = append(names, "cooldown")
	}
	Group(fs, GroupLoad, names...)
}

// intList is a comma-separated list of positive integers.
type intList struct{ v *[]int }

func (l *intList) String() string {
	if l.v == nil {
		return ""
	}
	parts := make([]string, len(*l.v))
	for i, n := range *l.v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
	out, err := ParseInts(s)
	if err != nil {
		return err
	}
	*l.v = out
	return nil
}

func (l *intList) Type() string { return "N[,N...]" }

// ParseInts parses "20,30,40" (spaces allowed) into positive integers.
func ParseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: want N or a comma list such as 8,16", s)
	}
	return out, nil
}

// AbortOnFail registers --abort-on-fail, bound to abort.
func AbortOnFail(fs *pflag.FlagSet, abort *bool) {
	fs.BoolVar(abort, "abort-on-fail", *abort, "check the --threshold criteria every few seconds while a level is measured and stop at the first failure (its result is saved, cut short)")
	Group(fs, GroupOutput, "abort-on-fail")
}

// ExitThresholds is the exit code of a command whose results are saved
// but failed a --threshold (the README lists every exit code).
const ExitThresholds = 3

// DefaultFailFast is how long a level may run with every request failing
// the same way before the command stops early.
const DefaultFailFast = 10 * time.Second

// Goodput registers --goodput (repeatable), vLLM's goodput objectives,
// bound to slo: every value typed is appended, space-separated, in the
// form result.ParseSLO reads ("ttft:400 tpot:60"); the first replaces the
// default (a sweep file's).
func Goodput(fs *pflag.FlagSet, slo *string) {
	fs.Var(&joinValue{p: slo}, "goodput", "vLLM's goodput SLOs: a request is good only if it meets every one named, KEY:MS with KEY ttft, tpot or e2el, e.g. --goodput ttft:400,tpot:60 (repeatable); adds goodput and SLO attainment to the results")
	Group(fs, GroupOutput, "goodput")
}

// FailFast registers --fail-fast, bound to d (its current value is the
// default shown).
func FailFast(fs *pflag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "fail-fast", *d, "stop when every request of a level's first stretch (warm-up included) failed with one error class (0: never)")
	Group(fs, GroupLoad, "fail-fast")
}

// joinValue is a repeatable string flag whose values are joined with
// spaces; the first Set replaces the default.
type joinValue struct {
	p   *string
	set bool
}

func (v *joinValue) Set(s string) error {
	if !v.set {
		*v.p, v.set = "", true
	}
	if *v.p != "" {
		*v.p += " "
	}
	*v.p += strings.TrimSpace(s)
	return nil
}

func (v *joinValue) String() string { return *v.p }
func (v *joinValue) Type() string   { return "KEY:MS" }

// Scrape registers --scrape (repeatable), --scrape-interval and
// --scrape-timeout, the serving stack's /metrics endpoints read at the
// edges of every measured window (pkg/servermetrics), bound to the given fields.
// Zero durations take pkg/servermetrics's defaults.
// ScrapePods registers the flags of servermetrics.Pods, bound to p: the serving
// pods whose /metrics are read, found through the Kubernetes API.
func ScrapePods(fs *pflag.FlagSet, p *servermetrics.Pods) {
	fs.StringVar(&p.Selector, "scrape-pods", p.Selector, "label selector of the serving pods whose /metrics are read, listed again every window (Kubernetes; e.g. app=vllm)")
	fs.IntVar(&p.Port, "scrape-pods-port", p.Port, "the serving pods' metrics port (with --scrape-pods)")
	fs.StringVar(&p.Path, "scrape-pods-path", p.Path, "the serving pods' metrics path (default /metrics)")
	fs.StringVar(&p.Namespace, "scrape-pods-namespace", p.Namespace, "the serving pods' namespace (default: this pod's, or the kubeconfig's)")
	Group(fs, GroupOutput, "scrape-pods", "scrape-pods-port", "scrape-pods-path", "scrape-pods-namespace")
}

func Scrape(fs *pflag.FlagSet, urls *[]string, interval, timeout *time.Duration) {
	fs.StringArrayVar(urls, "scrape", *urls, "a /metrics URL of the serving stack (frontend, worker or aggregate) read at the start and end of every measured window, or \""+
		servermetrics.SimEndpoint+"\" for the in-process simulator's; adds server-side figures to the results (repeatable)")
	fs.DurationVar(interval, "scrape-interval", *interval, fmt.Sprintf("how often --scrape endpoints' gauges (queue, KV usage) are sampled within a window (0: %s)", servermetrics.DefaultInterval))
	fs.DurationVar(timeout, "scrape-timeout", *timeout, fmt.Sprintf("bound on one read of one --scrape endpoint (0: %s)", servermetrics.DefaultTimeout))
	Group(fs, GroupOutput, "scrape", "scrape-interval", "scrape-timeout")
}

// MetricsListen registers --metrics-listen, bound to addr: the address
// whose /metrics serves the command's Prometheus metrics
// (docs/metrics.md). run, sweep, coordinator and agent share it; check a
// value with CheckListen before serving.
func MetricsListen(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics-listen", *addr, "serve Prometheus metrics on ADDR/metrics, host:port (e.g. :9090; empty: none)")
	Group(fs, GroupOutput, "metrics-listen")
}

// UIBaseline registers --ui-baseline: a sweep's baseline.json drawn as
// reference lines in the live dashboard (served at /ui on the metrics
// port), the same flag on run, coordinator and sweep.
func UIBaseline(fs *pflag.FlagSet, path *string) {
	fs.StringVar(path, "ui-baseline", *path, "a sweep's baseline.json, drawn as reference lines in the dashboard at METRICS-LISTEN/ui (needs --metrics-listen)")
	Group(fs, GroupOutput, "ui-baseline")
}

// CheckListen reports whether addr is a host:port a server can listen on
// (the host may be empty, the port a number from 0 to 65535); it does not
// listen.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port, e.g. :9090: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}
