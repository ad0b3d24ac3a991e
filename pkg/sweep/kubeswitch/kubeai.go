package kubeswitch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// ModelResource is kubeai's Model resource.
var ModelResource = schema.GroupVersionResource{Group: "kubeai.org", Version: "v1", Resource: "models"}

// kubeai's load-balancing strategies.
const (
	StrategyPrefixHash = "PrefixHash"
	StrategyLeastLoad  = "LeastLoad"
	// DefaultKubeAISelector picks a Model's server pods by the label kubeai
	// puts on them; {name} is the Model.
	DefaultKubeAISelector = "model={name}"
)

// DefaultKubeAIValues maps fleetbench's mode names to kubeai strategies:
// PrefixHash (consistent hashing with bounded loads on the prompt prefix)
// is kubeai's cache-aware routing, LeastLoad its load-only routing.
var DefaultKubeAIValues = map[string]string{"kv": StrategyPrefixHash, "round_robin": StrategyLeastLoad}

// kubeaiSwitch sets spec.loadBalancing.strategy of a kubeai Model. kubeai's
// proxy reads the strategy per request, so no pod needs a restart.
type kubeaiSwitch struct {
	conn
	name           string
	values         valueMap
	selector       string
	restartWorkers bool
	log            hclog.Logger
}

var (
	_ sweep.Switcher   = (*kubeaiSwitch)(nil)
	_ sweep.ModeReader = (*kubeaiSwitch)(nil)
)

func newKubeAI(cfg sweep.SwitchSpec, o *optionSet, s settings, log hclog.Logger) (*kubeaiSwitch, error) {
	if err := checkFields(cfg, "restart_workers", "timeout"); err != nil {
		return nil, err
	}
	k := &kubeaiSwitch{
		conn:           conn{s: s},
		name:           o.required("name", "llama-3.1-8b-instruct-fp8-l4"),
		values:         o.values("values", DefaultKubeAIValues),
		selector:       o.str("selector", DefaultKubeAISelector),
		restartWorkers: o.boolean("restart_workers", cfg.RestartWorkers),
	}
	for mode, v := range k.values {
		if v != StrategyPrefixHash && v != StrategyLeastLoad {
			o.errorf("option values: mode %s maps to %q, not %s or %s", mode, v, StrategyPrefixHash, StrategyLeastLoad)
		}
	}
	if err := o.finish(); err != nil {
		return nil, err
	}
	k.selector = strings.ReplaceAll(k.selector, "{name}", k.name)
	k.log = log.With("model", k.name)
	return k, nil
}

// Switch sets the Model's strategy, restarts its server pods when asked,
// and waits until status.replicas.ready reaches the desired replicas (and
// the restarted pods are Ready).
func (k *kubeaiSwitch) Switch(ctx context.Context, mode string) error {
	if err := k.do(ctx, mode); err != nil {
		return fmt.Errorf("switch to mode %q: %w", mode, err)
	}
	return nil
}

func (k *kubeaiSwitch) do(ctx context.Context, mode string) error {
	start := time.Now()
	strategy := k.values.value(mode)
	if strategy != StrategyPrefixHash && strategy != StrategyLeastLoad {
		return fmt.Errorf("mode %q maps to strategy %q, not %s or %s (set option values)", mode, strategy, StrategyPrefixHash, StrategyLeastLoad)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, k.s.timeout, fmt.Errorf("switch timed out after %s", k.s.timeout))
	defer cancel()
	c, err := k.get()
	if err != nil {
		return err
	}
	res := c.dyn.Resource(ModelResource).Namespace(c.ns)
	patch := fmt.Sprintf(`{"spec":{"loadBalancing":{"strategy":%q}}}`, strategy)
	m, err := res.Patch(ctx, k.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch model %s/%s: %w", c.ns, k.name, err)
	}
	k.log.Info("load-balancing strategy set", "strategy", strategy, "generation", m.GetGeneration())

	var pods *podSet
	if k.restartWorkers {
		ps := podSet{name: "model " + k.name + " pods", selector: k.selector, want: modelWant(m)}
		if ps.old, err = deletePods(ctx, c.cs, c.ns, ps.selector); err != nil {
			return err
		}
		k.log.Info("model pods restarted", "pods", len(ps.old))
		pods = &ps
	}
	err = poll(ctx, k.s.poll, "model "+k.name, func(ctx context.Context) (bool, string, error) {
		if pods != nil {
			if ok, why, err := pods.ready(ctx, c.cs, c.ns); !ok || err != nil {
				return false, why, err
			}
		}
		cur, err := res.Get(ctx, k.name, metav1.GetOptions{})
		if err != nil {
			if err := transient(err); err != nil {
				return false, "", err
			}
			return false, err.Error(), nil
		}
		want := modelWant(cur)
		ready, _, _ := unstructured.NestedInt64(cur.Object, "status", "replicas", "ready")
		if int(ready) < want {
			return false, fmt.Sprintf("model %s: %d of %d replicas ready", k.name, ready, want), nil
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	k.log.Info("routing mode switched", "mode", mode, "strategy", strategy, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// modelWant is the number of ready replicas to wait for: spec.replicas
// when set, else status.replicas.all, and at least one, since a sweep
// against a Model scaled to zero would only measure its cold start.
func modelWant(m *unstructured.Unstructured) int {
	n, ok, _ := unstructured.NestedInt64(m.Object, "spec", "replicas")
	if !ok {
		n, _, _ = unstructured.NestedInt64(m.Object, "status", "replicas", "all")
	}
	return max(int(n), 1)
}

// Current reads the Model's strategy (LeastLoad, kubeai's default, when
// unset) and returns the mode it maps to.
func (k *kubeaiSwitch) Current(ctx context.Context) (string, error) {
	c, err := k.get()
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	m, err := c.dyn.Resource(ModelResource).Namespace(c.ns).Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read current mode: get model %s/%s: %w", c.ns, k.name, err)
	}
	s, _, _ := unstructured.NestedString(m.Object, "spec", "loadBalancing", "strategy")
	if s == "" {
		s = StrategyLeastLoad
	}
	return k.values.mode(s), nil
}
