package flags

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/pkg/workload"
)

// settings is what a command binds: the three shared groups.
type settings struct {
	target, model, endpoint, keyEnv string
	w                               workload.Config
	levels                          []int
	rate                            float64
	warmup, duration, cooldown      time.Duration
}

func defaults() *settings {
	return &settings{
		endpoint: DefaultEndpoint, keyEnv: DefaultAPIKeyEnv, w: workload.Default(),
		warmup: DefaultWarmup, duration: DefaultDuration, cooldown: DefaultCooldown,
	}
}

func register(fs *pflag.FlagSet, s *settings) {
	Target(fs, &s.target, &s.model, &s.endpoint, &s.keyEnv)
	Workload(fs, &s.w)
	AddLoad(fs, Load{Concurrency: &s.levels, RequestRate: &s.rate, Warmup: &s.warmup, Duration: &s.duration, Cooldown: &s.cooldown})
	Alias(fs, "levels", "concurrency")
}

func parse(t *testing.T, args ...string) (*settings, *pflag.FlagSet, string) {
	t.Helper()
	s := defaults()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	register(fs, s)
	Record(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return s, fs, out.String()
}

func TestDefaultsAreTheOwnersDefaults(t *testing.T) {
	s, fs, _ := parse(t)
	if !reflect.DeepEqual(s.w, workload.Default()) {
		t.Errorf("workload %+v, want workload.Default() %+v", s.w, workload.Default())
	}
	for name, want := range map[string]string{
		"seed": "0", "max-tokens": "1024", "workload": "docchat", "think-time": "none", "turns": "",
		"prompt-tokens": "3100", "documents": "10", "endpoint": "chat", "api-key-env": "OPENAI_API_KEY",
		"warmup": "1m0s", "duration": "5m0s", "cooldown": "30s",
	} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s default %q, want %q", name, got, want)
		}
	}
}

func TestInterspersedAndGNUForms(t *testing.T) {
	s, fs, _ := parse(t, "pos1", "--turns=2-4", "--seed", "7", "pos2", "--think-time", "exp:2s",
		"--user-model-url", "http://u:8000/v1", "--user-model=small", "--concurrency", "8,16")
	if got := fs.Args(); !reflect.DeepEqual(got, []string{"pos1", "pos2"}) {
		t.Errorf("positional %q", got)
	}
	want := workload.Default()
	want.Turns, want.Seed = workload.Turns{Min: 2, Max: 4}, 7
	want.Think = workload.ThinkTime{Kind: workload.ThinkExp, Mean: 2 * time.Second}
	want.UserModel = &workload.UserModelConfig{URL: "http://u:8000/v1", Model: "small"}
	if !reflect.DeepEqual(s.w, want) {
		t.Errorf("workload\n got %+v\nwant %+v", s.w, want)
	}
	if !reflect.DeepEqual(s.levels, []int{8, 16}) {
		t.Errorf("levels %v", s.levels)
	}
}

func TestBadValuesNameTheFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--turns", "5-3"}, {"--concurrency", "8,x"}, {"--concurrency", "0"}, {"--think-time", "soon"},
		{"--warmup", "60"}, {"--seed", "x"},
	} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		register(fs, defaults())
		if err := fs.Parse(args); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%q: error %v, want one naming %s", args, err, args[0])
		}
	}
}

func TestAliasSetsTheFlagAndSaysSo(t *testing.T) {
	s, _, out := parse(t, "--levels", "20,40")
	if !reflect.DeepEqual(s.levels, []int{20, 40}) {
		t.Errorf("levels %v", s.levels)
	}
	if !strings.Contains(out, "--levels has been deprecated, use --concurrency instead") {
		t.Errorf("no deprecation notice: %q", out)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	register(fs, defaults())
	if f := fs.Lookup("levels"); !f.Hidden {
		t.Error("the alias shows in help")
	}
}

// TestReplayOverridesOnlyWhatWasTyped: a file's values bound to another
// flag set keep everything the user did not type, in the order typed.
func TestReplayOverridesOnlyWhatWasTyped(t *testing.T) {
	_, typed, _ := parse(t, "--seed", "9", "--levels", "100", "--user-model", "small")
	file := defaults()
	file.w.MaxTokens, file.w.Seed, file.w.Kind = 256, 1, workload.KindShareGPT
	file.levels, file.model = []int{1, 2}, "from-file"
	file.w.UserModel = &workload.UserModelConfig{URL: "http://file:8000/v1", Model: "big"}
	on := pflag.NewFlagSet("file", pflag.ContinueOnError)
	register(on, file)
	if err := Replay(typed, on); err != nil {
		t.Fatal(err)
	}
	if file.w.Seed != 9 || !reflect.DeepEqual(file.levels, []int{100}) || file.w.UserModel.Model != "small" {
		t.Errorf("typed flags not applied: seed %d levels %v user model %+v", file.w.Seed, file.levels, file.w.UserModel)
	}
	if file.w.MaxTokens != 256 || file.w.Kind != workload.KindShareGPT || file.model != "from-file" ||
		file.w.UserModel.URL != "http://file:8000/v1" {
		t.Errorf("file values lost: %+v model %q", file.w, file.model)
	}
}
