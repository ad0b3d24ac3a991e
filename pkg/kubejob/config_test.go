package kubejob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAgentCount(t *testing.T) {
	tests := []struct {
		name                     string
		agents, capacity, maxLvl int
		want                     int
	}{
		{"explicit", 3, 0, 0, 3},
		{"explicit wins", 5, 10, 20, 5},
		{"exact", 0, 50, 200, 4},
		{"rounds up", 0, 64, 200, 4},
		{"one", 0, 64, 1, 1},
		{"nothing", 0, 0, 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Agents: tt.agents, AgentCapacity: tt.capacity, MaxLevel: tt.maxLvl}
			if got := c.AgentCount(); got != tt.want {
				t.Errorf("AgentCount() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Config{Namespace: "bench", Image: "fleetbench:dev", Agents: 2, CoordinatorAddr: "coord:7070"}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" for valid
	}{
		{"ok", func(*Config) {}, ""},
		{"capacity", func(c *Config) { c.Agents, c.AgentCapacity, c.MaxLevel = 0, 10, 95 }, ""},
		{"no namespace", func(c *Config) { c.Namespace = "" }, "namespace: required"},
		{"no image", func(c *Config) { c.Image = "" }, "image: required"},
		{"no coordinator", func(c *Config) { c.CoordinatorAddr = "" }, "coordinator address: required"},
		{"coordinator without port", func(c *Config) { c.CoordinatorAddr = "coord" }, "want host:port"},
		{"no agent count", func(c *Config) { c.Agents = 0 }, "give a count"},
		{"capacity too small", func(c *Config) { c.AgentCapacity, c.MaxLevel = 10, 30 }, "cannot hold every session"},
		{"bad spread", func(c *Config) { c.Spread = "Sometimes" }, "spread"},
		{"bad port range", func(c *Config) { c.PortRange = "65535 1024" }, "port range"},
		{"port range one number", func(c *Config) { c.PortRange = "1024" }, "port range"},
		{"bad name", func(c *Config) { c.Name = "Agents_1" }, "job name"},
		{"long name", func(c *Config) { c.Name = strings.Repeat("a", 50); c.RunID = "abcde" }, "at most 52"},
		{"bad secret key", func(c *Config) { c.Token = SecretRef{Name: "tok", Key: "a/b"} }, "token secret key"},
		{"reserved label", func(c *Config) { c.Labels = map[string]string{LabelAgents: "x"} }, "set by fleetbench"},
		{"bad label value", func(c *Config) { c.Labels = map[string]string{"team": "a b"} }, "label team"},
		{"owner without uid", func(c *Config) { c.Owner = ownerFrom(envMap{EnvPodName: "p", EnvPodUID: "u"}.get); c.Owner.UID = "" }, "owner"},
		{"negative backoff", func(c *Config) { c.BackoffLimitPerIndex = new(int32(-1)) }, "backoff"},
		{"metrics port out of range", func(c *Config) { c.MetricsPort = 70000 }, "metrics port 70000"},
		{"metrics port negative", func(c *Config) { c.MetricsPort = -1 }, "metrics port -1"},
		{"do not schedule", func(c *Config) { c.Spread = corev1.DoNotSchedule }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

type envMap map[string]string

func (m envMap) get(k string) string { return m[k] }

func TestOwnerFromEnv(t *testing.T) {
	if o := ownerFrom(envMap{EnvPodName: "coord"}.get); o != nil {
		t.Errorf("owner without POD_UID = %+v, want nil", o)
	}
	o := ownerFrom(envMap{EnvPodName: "coord", EnvPodUID: "1234"}.get)
	if o == nil || o.Kind != "Pod" || o.APIVersion != "v1" || o.Name != "coord" || o.UID != "1234" {
		t.Errorf("owner = %+v, want Pod coord uid 1234", o)
	}
}

func TestParseSecretRef(t *testing.T) {
	tests := []struct {
		in      string
		want    SecretRef
		wantErr bool
	}{
		{"", SecretRef{}, false},
		{"tok", SecretRef{Name: "tok", Key: "token"}, false},
		{"tok/key", SecretRef{Name: "tok", Key: "key"}, false},
		{"/key", SecretRef{}, true},
		{"tok/", SecretRef{}, true},
	}
	for _, tt := range tests {
		got, err := ParseSecretRef(tt.in, DefaultTokenKey)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseSecretRef(%q) = %+v, %v; want %+v, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseMount(t *testing.T) {
	m, err := ParseMount("pvc:sharegpt:/data/sets")
	if err != nil || m != (Mount{Kind: MountPVC, Name: "sharegpt", Path: "/data/sets"}) {
		t.Errorf("ParseMount = %+v, %v", m, err)
	}
	for _, bad := range []string{"pvc:sharegpt", "nfs:x:/data", "pvc:Bad_Name:/data", "pvc:x:data", "pvc:x:/data/../etc",
		"pvc:x:/", "pvc:x:/tmp", "pvc:x:/tmp/d", "secret:x:" + TokenDir, "pvc:x:/var/run/secrets"} {
		if _, err := ParseMount(bad); err == nil {
			t.Errorf("ParseMount(%q) accepted", bad)
		}
	}
	cfg := Config{Namespace: "bench", Image: "i", Agents: 1, CoordinatorAddr: "c:1",
		Mounts: []Mount{{Kind: MountPVC, Name: "a", Path: "/data"}, {Kind: MountConfigMap, Name: "b", Path: "/data"}}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "mounted twice") {
		t.Errorf("Validate with one path mounted twice: %v", err)
	}
}
