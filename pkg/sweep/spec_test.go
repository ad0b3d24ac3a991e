package sweep

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/pkg/workload"
)

func TestLoadExample(t *testing.T) {
	s, err := Load("testdata/sweep.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got, want := s.Levels, []int{20, 30, 40, 50, 60, 70, 80, 100, 120}; !reflect.DeepEqual(got, want) {
		t.Errorf("levels %v", got)
	}
	if s.Measure.D() != 5*time.Minute || s.Warmup.D() != time.Minute || s.Cooldown.D() != 30*time.Second {
		t.Errorf("durations: warmup %s measure %s cooldown %s", s.Warmup, s.Measure, s.Cooldown)
	}
	if s.Workload.Think != (workload.ThinkTime{Kind: workload.ThinkExp, Mean: 2 * time.Second}) {
		t.Errorf("think time %v", s.Workload.Think)
	}
	if wc, err := s.WorkloadConfig(); err != nil || wc.UserModel == nil ||
		*wc.UserModel != (workload.UserModelConfig{URL: "http://user-sim:8000/v1", Model: "llama-3.2-1b", APIKeyEnv: "USER_MODEL_KEY"}) {
		t.Errorf("user model %+v (%v)", wc.UserModel, err)
	}
	if b, c := s.Compared(); b != "round_robin" || c != "kv" {
		t.Errorf("compared %s vs %s", b, c)
	}
	if sw := s.SwitchOf("kv"); sw == nil || sw.Kind != KindExec || sw.Timeout.D() != 5*time.Minute {
		t.Errorf("kv switch %+v, want the default exec switch", sw)
	}
	if sw := s.SwitchOf("round_robin"); sw == nil || sw.Kind != KindHTTP || sw.Headers["Authorization"] != "Bearer ${ROUTER_TOKEN}" {
		t.Errorf("round_robin switch %+v", sw)
	}
	// Unset fields keep their defaults.
	if s.Endpoint != "chat" || s.Workload.Kind != "docchat" {
		t.Errorf("defaults lost: endpoint %q kind %q", s.Endpoint, s.Workload.Kind)
	}
	rc := s.ReadyConfig()
	if rc.Completions != 5 || rc.TTFTSpread != 2.5 || rc.CompletionsTimeout != 10*time.Minute || rc.Client.Model != s.Model {
		t.Errorf("ready config %+v", rc)
	}
	// Marshal gives back what Load reads.
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Marshal): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip differs:\n%s", b)
	}
}

func TestDefaults(t *testing.T) {
	s := Default()
	if s.Warmup.D() != 60*time.Second || s.Measure.D() != 300*time.Second || s.Snapshots != 3 ||
		s.SLA.D() != 400*time.Millisecond || s.FallbackSLA.D() != 450*time.Millisecond || s.Runs != 1 {
		t.Errorf("defaults %+v", s)
	}
}

// TestParseStrict: unknown or mistyped fields are errors that name the field.
func TestParseStrict(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"top level", "target: http://x\nlevles: [1]\n", `unknown field "levles"`},
		{"nested workload", "workload:\n  prompt_tokns: 10\n", `unknown field "prompt_tokns" in workload`},
		{"in a switch", "modes:\n- name: kv\n- name: rr\n  switch: {kind: http, uri: http://x}\n", `unknown field "uri" in modes[1].switch (known: kind, url,`},
		{"in readiness", "readiness: {timeout: 5m}\n", `unknown field "timeout"`},
		{"duplicate", "runs: 1\nruns: 2\n", `"runs"`},
		{"bare number duration", "warmup: 60\n", `want a string with a unit such as "60s"`},
		{"bad duration", "measure: 5 minutes\n", `parse duration "5 minutes"`},
		{"bad think time", "workload: {think_time: soon}\n", "invalid think time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want it to contain %s", err, tc.want)
			}
		})
	}
	// Load names the file.
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("modez: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"modez"`) {
		t.Errorf("Load error %v", err)
	}
}

func validSpec() *Spec {
	s := Default()
	s.Target = "http://127.0.0.1:8000"
	s.Model = "m"
	s.Levels = []int{10, 20}
	s.Modes = []Mode{{Name: "kv"}, {Name: "round_robin"}}
	s.Switch = &SwitchSpec{Kind: KindNone}
	s.Output = "out"
	return s
}

func TestValidate(t *testing.T) {
	if err := validSpec().Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   []string
	}{
		{"empty", func(s *Spec) { *s = Spec{} }, []string{
			"target is required", "model is required", "levels are required", "modes are required",
			"runs 0 must be at least 1", "measure 0s must be positive", "output directory is required",
		}},
		{"levels", func(s *Spec) { s.Levels = []int{10, 0, 10} }, []string{"level 0 must be at least 1", "level 10 is listed twice"}},
		{"mode names", func(s *Spec) { s.Modes = []Mode{{Name: "kv"}, {Name: "kv"}, {Name: "a/b"}} }, []string{`mode "kv" is listed twice`, `name "a/b"`}},
		{"no switch", func(s *Spec) { s.Switch = nil }, []string{`mode "kv" has no switch`}},
		{"unknown switch", func(s *Spec) { s.Switch.Kind = "kubernetes" }, []string{`unknown switch kind "kubernetes"`}},
		{"field of another kind", func(s *Spec) { s.Switch.Command = []string{"x"} }, []string{`field command does not apply to switch kind "none"`}},
		{"exec without command", func(s *Spec) { s.Switch.Kind = KindExec }, []string{"command is required"}},
		{"compared", func(s *Spec) { s.Baseline, s.Candidate = "kv", "kv" }, []string{`baseline and candidate are both "kv"`}},
		{"compared unknown", func(s *Spec) { s.Candidate = "rr" }, []string{`candidate "rr" is not one of the modes`}},
		{"sla", func(s *Spec) { s.FallbackSLA = Duration(300 * time.Millisecond) }, []string{"fallback_sla 300ms must not be below sla 400ms"}},
		{"snapshots", func(s *Spec) { s.Measure = Duration(2 * time.Second) }, []string{"gives less than 1s each"}},
		{"target", func(s *Spec) { s.Target = "localhost:8000" }, []string{`target "localhost:8000" must be an http://`}},
		{"target user info", func(s *Spec) { s.Target = "http://u:hunter2@vllm:8000" }, []string{`target "http://vllm:8000" must not carry user info`}},
		{"turns", func(s *Spec) { s.Workload.Turns = workload.Turns{Min: 5, Max: 3} }, []string{`workload: turns "5-3"`}},
		{"readiness", func(s *Spec) { s.Readiness.MaxTokens = 20 }, []string{"readiness: max tokens 20 must be 1..8"}},
		{"user model without model", func(s *Spec) { s.Workload.UserModel = &workload.UserModelConfig{URL: "http://small:8000/v1"} }, []string{"workload: user_model: model is required"}},
		{"user model url", func(s *Spec) { s.Workload.UserModel = &workload.UserModelConfig{URL: "small:8000", Model: "m"} }, []string{`user_model: url "small:8000" must be http://`}},
		{"user model user info", func(s *Spec) {
			s.Workload.UserModel = &workload.UserModelConfig{URL: "http://u:hunter2@small:8000/v1", Model: "m"}
		}, []string{`user_model: url "http://small:8000/v1" must not carry user info`}},
		{"user model sharegpt", func(s *Spec) {
			s.Workload.Kind, s.Workload.Dataset = "sharegpt", "x.json"
			s.Workload.UserModel = &workload.UserModelConfig{URL: "http://small:8000/v1", Model: "m"}
		}, []string{"only docchat asks a user model, not sharegpt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.mutate(s)
			err := s.Validate()
			if err == nil {
				t.Fatal("Validate passed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}

// TestFlagsOverrideFile: flags the user set override the file; flags not
// set leave it alone even though they have defaults.
func TestFlagsOverrideFile(t *testing.T) {
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.StringP("file", "f", "", "spec file")
	RegisterFlags(fs)
	err := fs.Parse([]string{
		"-f", "testdata/sweep.yaml",
		"--levels", "1600, 3200,8000",
		"--runs=2",
		"--measure", "90s",
		"--think-time", "none",
		"--switch-timeout", "1m",
		"--switch-header", "X-A: 1", "--switch-header", "X-B:2",
		"--ready-skip",
		"--out", "elsewhere",
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load(*file)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyFlags(fs); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Levels, []int{1600, 3200, 8000}) || s.Runs != 2 || s.Measure.D() != 90*time.Second ||
		s.Workload.Think != (workload.ThinkTime{}) || s.Output != "elsewhere" || !s.Readiness.Skip {
		t.Errorf("flags not applied: %+v", s)
	}
	// Unset flags keep the file's values, not the flags' defaults.
	if s.Warmup.D() != time.Minute || s.Snapshots != 3 || s.Workload.MaxTokens != 256 || s.Agents != 4 || s.Baseline != "round_robin" {
		t.Errorf("file values lost: warmup %s snapshots %d max tokens %d agents %d", s.Warmup, s.Snapshots, s.Workload.MaxTokens, s.Agents)
	}
	// --switch-* flags reach the default switch and every mode's own.
	for _, m := range []string{"kv", "round_robin"} {
		sw := s.SwitchOf(m)
		if sw.Timeout.D() != time.Minute {
			t.Errorf("mode %s switch timeout %s", m, sw.Timeout)
		}
	}
	if sw := s.SwitchOf("round_robin"); !reflect.DeepEqual(sw.Headers, map[string]string{"X-A": "1", "X-B": "2"}) {
		t.Errorf("headers %v", sw.Headers)
	}
	if sw := s.SwitchOf("kv"); sw.Kind != KindExec {
		t.Errorf("kv switch kind %s; --switch was not given", sw.Kind)
	}
}

// TestFlagsWithoutFile: flags alone make a valid spec; --modes keeps a
// file's switch for modes it already had.
func TestFlagsWithoutFile(t *testing.T) {
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	RegisterFlags(fs)
	err := fs.Parse([]string{
		"--target", "http://127.0.0.1:8000", "--model", "m", "--levels", "20,30",
		"--modes", "kv,round_robin", "--switch", "exec", "--switch-command", "./switch.sh --mode {mode}",
		"--out", "o", "--switch-restart-workers=false",
		"--user-model-url", "http://small:8000/v1", "--user-model", "small",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := Default()
	if err := s.ApplyFlags(fs); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got := s.SwitchOf("kv").Command; !reflect.DeepEqual(got, []string{"./switch.sh", "--mode", "{mode}"}) {
		t.Errorf("command %q", got)
	}
	if um := s.Workload.UserModel; um == nil || *um != (workload.UserModelConfig{URL: "http://small:8000/v1", Model: "small"}) {
		t.Errorf("user model %+v", um)
	}

	// A bad value is a parse error naming its flag.
	for _, args := range [][]string{{"--levels", "10,x"}, {"--warmup", "60"}} {
		bad := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
		bad.SetOutput(io.Discard)
		RegisterFlags(bad)
		if err := bad.Parse(args); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("parse %q: error %v, want one naming %s", args, err, args[0])
		}
	}
}

// FuzzParse: no input makes Parse panic, and what Parse accepts Marshal
// writes back in a form Parse accepts again.
func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/sweep.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("levels: [1, 2]\nwarmup: 1s\n"))
	f.Add([]byte("modes: [{name: a, switch: {kind: none}}]"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		out, err := s.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("Parse(Marshal(Parse(x))): %v\n%s", err, out)
		}
	})
}

// TestEveryFileSettingHasAFlag walks the spec's file keys and checks each
// has a flag, so a sweep can be set up from the command line alone. The
// exceptions are listed with the reason.
func TestEveryFileSettingHasAFlag(t *testing.T) {
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	AddFlags(fs, Default())
	byKey := map[string]string{ // file key -> its flag, where the names differ
		"levels": "concurrency", "measure": "duration", "output": "out", "api_key_env": "api-key-env",
		"workload.kind": "workload", "workload.think_time": "think-time", "modes": "modes",
		"switch.kind": "switch", "readiness.skip": "ready-skip", "sim.use": "sim",
		"fleet.remote_agents": "remote-agents", "fleet.metrics_listen": "metrics-listen", "fleet.no_restore": "no-restore",
		"fleet.tls_cert": "tls-cert", "fleet.tls_key": "tls-key", "fleet.token_file": "token-file",
		"fleet.join_timeout": "join-timeout", "fleet.listen": "listen", "switch.options": "switch-option",
		"switch.headers": "switch-header", "thresholds": "threshold", "scrape.urls": "scrape",
		"scrape.pods.selector": "scrape-pods", "scrape.pods.port": "scrape-pods-port", "scrape.pods.path": "scrape-pods-path",
		"scrape.pods.namespace": "scrape-pods-namespace",
	}
	skip := map[string]string{
		"kube":         "its keys are the Kubernetes flags' own names",
		"modes.name":   "--modes",
		"modes.switch": "a switch per mode is a file setting; --switch-* flags set every mode's",
	}
	prefix := map[string]string{"workload": "", "readiness": "ready-", "switch": "switch-", "sim": "sim-", "fleet": "", "scrape": "scrape-"}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		for f := range typ.Fields() {
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if key == "" || key == "-" {
				continue
			}
			p := key
			if path != "" {
				p = path + "." + key
			}
			if _, ok := skip[p]; ok {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Duration]() && ft != reflect.TypeFor[workload.ThinkTime]() &&
				ft != reflect.TypeFor[workload.Turns]() {
				walk(ft, p)
				continue
			}
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				walk(ft.Elem(), p)
				continue
			}
			name, ok := byKey[p]
			if !ok {
				top, _, _ := strings.Cut(p, ".")
				name = strings.ReplaceAll(key, "_", "-")
				if pre, ok := prefix[top]; ok && top != p {
					name = pre + name
				}
				if top == "workload" && strings.HasPrefix(p, "workload.user_model.") {
					name = map[string]string{"url": "user-model-url", "model": "user-model", "api_key_env": "user-model-key-env"}[key]
				}
			}
			if fs.Lookup(name) == nil {
				t.Errorf("file setting %s has no flag (looked for --%s)", p, name)
			}
		}
	}
	walk(reflect.TypeFor[Spec](), "")
}
