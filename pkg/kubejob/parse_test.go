package kubejob

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseToleration(t *testing.T) {
	tests := []struct {
		in      string
		want    corev1.Toleration
		wantErr bool
	}{
		{"gpu=true:NoSchedule", corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}, false},
		{"dedicated:NoExecute", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, false},
		{"spot", corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}, false},
		{"pool=load", corev1.Toleration{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "load"}, false},
		{"gpu=true:Sometimes", corev1.Toleration{}, true},
		{":NoSchedule", corev1.Toleration{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseToleration(tt.in)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Errorf("ParseToleration(%q) = %+v, %v; want %+v, error %t", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseNodeSelector(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    map[string]string
		wantErr bool
	}{
		{"items and commas", []string{"pool=load,zone=a", "arch=amd64"}, map[string]string{"pool": "load", "zone": "a", "arch": "amd64"}, false},
		{"later wins", []string{"pool=a", "pool=b"}, map[string]string{"pool": "b"}, false},
		{"empty value", []string{"gpu="}, map[string]string{"gpu": ""}, false},
		{"none", nil, nil, false},
		{"no value", []string{"pool"}, nil, true},
		{"no key", []string{"=load"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNodeSelector(tt.in)
			if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseNodeSelector(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseResources(t *testing.T) {
	tests := []struct {
		name        string
		cpu, memory string
		// want* are the quantities' strings; "" means unset.
		wantCPU, wantMemory, wantMemoryLimit string
		wantErr                              bool
	}{
		{name: "both", cpu: "2", memory: "1Gi", wantCPU: "2", wantMemory: "1Gi", wantMemoryLimit: "1Gi"},
		{name: "cpu only", cpu: "500m", wantCPU: "500m"},
		{name: "memory only", memory: "512Mi", wantMemory: "512Mi", wantMemoryLimit: "512Mi"},
		{name: "none"},
		{name: "bad cpu", cpu: "two", wantErr: true},
		{name: "bad memory", memory: "lots", wantErr: true},
	}
	quantity := func(l corev1.ResourceList, name corev1.ResourceName) string {
		if q, ok := l[name]; ok {
			return q.String()
		}
		return ""
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResources(tt.cpu, tt.memory)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseResources(%q, %q) error %v, want error %t", tt.cpu, tt.memory, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			// A CPU limit would throttle the agent: never set one.
			if got := quantity(r.Limits, corev1.ResourceCPU); got != "" {
				t.Errorf("cpu limit %s, want none", got)
			}
			if quantity(r.Requests, corev1.ResourceCPU) != tt.wantCPU || quantity(r.Requests, corev1.ResourceMemory) != tt.wantMemory ||
				quantity(r.Limits, corev1.ResourceMemory) != tt.wantMemoryLimit {
				t.Errorf("resources %+v: want cpu request %q, memory request %q and limit %q",
					r, tt.wantCPU, tt.wantMemory, tt.wantMemoryLimit)
			}
		})
	}
}

func TestParseSecretEnv(t *testing.T) {
	tests := []struct {
		in                  string
		wantEnv, wantSecret string
		wantKey             string
		wantErr             bool
	}{
		{in: "USER_MODEL_KEY=user-model/key", wantEnv: "USER_MODEL_KEY", wantSecret: "user-model", wantKey: "key"},
		{in: "HF_TOKEN=hf", wantEnv: "HF_TOKEN", wantSecret: "hf", wantKey: "HF_TOKEN"},
		{in: "USER_MODEL_KEY", wantErr: true},
		{in: "=x/y", wantErr: true},
		{in: "A B=x", wantErr: true},
		{in: "A=", wantErr: true},
		{in: "A=/key", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ev, err := ParseSecretEnv(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseSecretEnv(%q) = %+v, %v; want error %t", tt.in, ev, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			var ref *corev1.SecretKeySelector
			if ev.ValueFrom != nil {
				ref = ev.ValueFrom.SecretKeyRef
			}
			if ev.Name != tt.wantEnv || ev.Value != "" || ref == nil || ref.Name != tt.wantSecret || ref.Key != tt.wantKey {
				t.Errorf("ParseSecretEnv(%q) = %+v, want $%s from Secret %s/%s", tt.in, ev, tt.wantEnv, tt.wantSecret, tt.wantKey)
			}
		})
	}
}
