package kubejob

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ParseSecretEnv parses ENV=name[/key] (--agent-secret-env) into an
// environment variable read from that Secret key; the key defaults to ENV.
func ParseSecretEnv(s string) (corev1.EnvVar, error) {
	name, ref, ok := strings.Cut(s, "=")
	if !ok || name == "" || ref == "" || strings.ContainsAny(name, "= ") {
		return corev1.EnvVar{}, fmt.Errorf("parse --agent-secret-env %q: want ENV=name[/key]", s)
	}
	sr, err := ParseSecretRef(ref, name)
	if err != nil {
		return corev1.EnvVar{}, fmt.Errorf("parse --agent-secret-env %q: %w", s, err)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: sr.Name}, Key: sr.Key,
	}}}, nil
}

// ParseResources returns the agent container's resources (--agent-cpu,
// --agent-memory; empty: none): the CPU as a request only (a CPU limit
// throttles the agent and skews its latency measurements), the memory as
// request and limit (an agent over it is OOM-killed and reported, not left
// to starve its node).
func ParseResources(cpu, memory string) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	if cpu != "" {
		q, err := resource.ParseQuantity(cpu)
		if err != nil {
			return r, fmt.Errorf("parse --agent-cpu %q: %w", cpu, err)
		}
		r.Requests = corev1.ResourceList{corev1.ResourceCPU: q}
	}
	if memory != "" {
		q, err := resource.ParseQuantity(memory)
		if err != nil {
			return r, fmt.Errorf("parse --agent-memory %q: %w", memory, err)
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[corev1.ResourceMemory] = q
		r.Limits = corev1.ResourceList{corev1.ResourceMemory: q}
	}
	return r, nil
}

// ParseNodeSelector parses "k=v,k2=v2" items (--node-selector) into one
// selector; a later key wins. No items: nil.
func ParseNodeSelector(items []string) (map[string]string, error) {
	var out map[string]string
	for _, item := range items {
		for kv := range strings.SplitSeq(item, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("parse --node-selector %q: want key=value", kv)
			}
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out, nil
}

// ParseToleration parses kubectl's taint syntax (--toleration):
// "key=value:Effect" (operator Equal), "key:Effect" or "key" (operator
// Exists); no effect tolerates every effect.
func ParseToleration(s string) (corev1.Toleration, error) {
	var t corev1.Toleration
	rest, effect, hasEffect := strings.Cut(s, ":")
	if hasEffect {
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return t, fmt.Errorf("parse --toleration %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", s, effect)
		}
	}
	key, value, hasValue := strings.Cut(rest, "=")
	if key == "" {
		return t, fmt.Errorf("parse --toleration %q: want key[=value][:effect]", s)
	}
	t.Key = key
	if hasValue {
		t.Operator, t.Value = corev1.TolerationOpEqual, value
	} else {
		t.Operator = corev1.TolerationOpExists
	}
	return t, nil
}
