package kubeswitch

import (
	"encoding/json"
	"testing"
)

func TestFieldPath(t *testing.T) {
	obj := map[string]any{}
	if err := json.Unmarshal([]byte(`{"spec":{"replicas":3,"template":{"spec":{"containers":[
		{"name":"sidecar","env":[{"name":"MODE","value":"wrong"}]},
		{"name":"router","env":[{"name":"LOG","value":"info"},{"name":"MODE","value":"kv"}]}]}}}}`), &obj); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
		wantErr    bool
	}{
		{path: "spec.template.spec.containers[name=router].env[name=MODE].value", want: "kv"},
		{path: ".spec.template.spec.containers[1].env[0].value", want: "info"},
		{path: "spec.replicas", want: "3"},
		{path: "spec.template.spec.containers[name=nope].env[name=MODE].value", wantErr: true},
		{path: "spec.template.spec.containers[5].name", wantErr: true},
		{path: "spec.template", wantErr: true},
	} {
		p, err := parsePath(c.path)
		if err != nil {
			t.Fatalf("parse %s: %v", c.path, err)
		}
		got, err := p.lookupString(obj)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("%s = %q, %v; want %q (error %t)", c.path, got, err, c.want, c.wantErr)
		}
	}
	for _, bad := range []string{"", "a..b", "a[", "a[x]", "a[=v]", "a.", "a[0]b"} {
		if _, err := parsePath(bad); err == nil {
			t.Errorf("parsePath(%q) succeeded", bad)
		}
	}
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"spec.a[name=x].b", "a[0]", ".x.y", "a[", "a]b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePath(s)
		if err != nil {
			return
		}
		// A parsed path prints as a path that parses to itself.
		q, err := parsePath(p.String())
		if err != nil || q.String() != p.String() {
			t.Fatalf("%q -> %q -> %v, %v", s, p.String(), q, err)
		}
		_, _ = p.lookup(map[string]any{"a": []any{map[string]any{"name": "x"}}})
	})
}

func TestEnvPatch(t *testing.T) {
	d := &dynamoSwitch{service: "Front/end", env: "DYN_ROUTER_MODE"}
	svc := map[string]any{}
	if err := json.Unmarshal([]byte(`{"envs":[{"name":"A","value":"1"},{"name":"DYN_ROUTER_MODE","value":"round-robin"}],
		"extraPodSpec":{"mainContainer":{"env":[{"name":"DYN_ROUTER_MODE"}]}}}`), &svc); err != nil {
		t.Fatal(err)
	}
	ops, changed, err := d.envPatch(svc, "kv")
	if err != nil || !changed {
		t.Fatalf("envPatch = %v, %t, %v", ops, changed, err)
	}
	b, _ := json.Marshal(ops)
	want := `[{"op":"test","path":"/spec/services/Front~1end/extraPodSpec/mainContainer/env/0/name","value":"DYN_ROUTER_MODE"},` +
		`{"op":"add","path":"/spec/services/Front~1end/extraPodSpec/mainContainer/env/0/value","value":"kv"},` +
		`{"op":"test","path":"/spec/services/Front~1end/envs/1/name","value":"DYN_ROUTER_MODE"},` +
		`{"op":"replace","path":"/spec/services/Front~1end/envs/1/value","value":"kv"}]`
	if string(b) != want {
		t.Errorf("patch\n got %s\nwant %s", b, want)
	}

	if _, changed, _ := d.envPatch(map[string]any{"envs": []any{map[string]any{"name": "DYN_ROUTER_MODE", "value": "kv"}}}, "kv"); changed {
		t.Error("a value already set counts as changed")
	}
	ops, _, _ = d.envPatch(map[string]any{}, "kv")
	if b, _ := json.Marshal(ops); string(b) != `[{"op":"add","path":"/spec/services/Front~1end/envs","value":[{"name":"DYN_ROUTER_MODE","value":"kv"}]}]` {
		t.Errorf("patch of a service without envs = %s", b)
	}
	if _, _, err := d.envPatch(map[string]any{"envs": []any{map[string]any{"name": "DYN_ROUTER_MODE", "valueFrom": map[string]any{}}}}, "kv"); err == nil {
		t.Error("valueFrom was overwritten")
	}
}

func TestValueMap(t *testing.T) {
	m, err := parseValues("kv=kv, round_robin=round-robin")
	if err != nil {
		t.Fatal(err)
	}
	for mode, val := range map[string]string{"kv": "kv", "round_robin": "round-robin", "random": "random"} {
		if m.value(mode) != val || m.mode(val) != mode {
			t.Errorf("%s <-> %s: value %q mode %q", mode, val, m.value(mode), m.mode(val))
		}
	}
}
