package kubeswitch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// DGDResource is the DynamoGraphDeployment resource of NVIDIA Dynamo's
// operator.
var DGDResource = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1alpha1", Resource: "dynamographdeployments"}

// Defaults of the dynamo options.
const (
	DefaultDynamoService = "Frontend"
	DefaultDynamoEnv     = "DYN_ROUTER_MODE"
	// DefaultDynamoSelector picks one service's pods by the labels Dynamo's
	// operator puts on them; {name} is the DGD, {service} the service.
	DefaultDynamoSelector = "nvidia.com/dynamo-graph-deployment-name={name},nvidia.com/dynamo-component={service}"
	// DefaultReadyCondition is the DGD condition that says the graph is up.
	DefaultReadyCondition = "Ready"
)

// ErrNotSet means Current found no value: the stack runs its built-in
// default, which fleetbench cannot name, so the mode is not restored.
var ErrNotSet = errors.New("not set")

// DefaultDynamoValues maps fleetbench's mode names to Dynamo's
// --router-mode values.
var DefaultDynamoValues = map[string]string{"kv": "kv", "round_robin": "round-robin"}

// Restart policies of the dynamo switch's frontend.
const (
	// RestartChanged waits for the operator's rollout when the value
	// changed and restarts nothing when it was already set.
	RestartChanged = "changed"
	// RestartAlways also deletes the service's pods when the value was
	// already set, so every switch starts with fresh routing state.
	RestartAlways = "always"
)

// dynamoSwitch sets one environment variable of one service of a DGD.
type dynamoSwitch struct {
	conn
	name, service, env string
	values             valueMap
	selector           string
	restart            string
	restartWorkers     bool
	workers            []string
	readyCondition     string
	log                hclog.Logger
}

var (
	_ sweep.Switcher   = (*dynamoSwitch)(nil)
	_ sweep.ModeReader = (*dynamoSwitch)(nil)
)

func newDynamo(cfg sweep.SwitchSpec, o *optionSet, s settings, log hclog.Logger) (*dynamoSwitch, error) {
	if err := checkFields(cfg, "restart_frontend", "restart_workers", "timeout"); err != nil {
		return nil, err
	}
	d := &dynamoSwitch{
		conn:           conn{s: s},
		name:           o.required("name", "llama-70b"),
		service:        o.str("service", DefaultDynamoService),
		env:            o.str("env", DefaultDynamoEnv),
		values:         o.values("values", DefaultDynamoValues),
		selector:       o.str("selector", DefaultDynamoSelector),
		restart:        o.oneOf("restart", RestartChanged, RestartChanged, RestartAlways),
		restartWorkers: o.boolean("restart_workers", cfg.RestartWorkers),
		workers:        o.list("workers"),
		readyCondition: o.str("ready_condition", DefaultReadyCondition),
	}
	if cfg.RestartFrontend {
		d.restart = RestartAlways
	}
	if len(d.workers) > 0 && !d.restartWorkers {
		o.errorf("option workers names the services restart_workers restarts; set restart_workers: true")
	}
	if err := o.finish(); err != nil {
		return nil, err
	}
	d.log = log.With("dgd", d.name, "service", d.service)
	return d, nil
}

// selectorOf returns the pod selector of a service.
func (d *dynamoSwitch) selectorOf(service string) string {
	return strings.NewReplacer("{name}", d.name, "{service}", service).Replace(d.selector)
}

// envRef is one place the variable is set in a service.
type envRef struct {
	// path is the JSON pointer of the env list element.
	path  string
	value string
	// hasValue is false when the element has no value field (an empty
	// value, or valueFrom).
	hasValue  bool
	valueFrom bool
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// serviceOf returns the named service of a DGD.
func (d *dynamoSwitch) serviceOf(dgd *unstructured.Unstructured) (map[string]any, error) {
	services, _, _ := unstructured.NestedMap(dgd.Object, "spec", "services")
	svc, ok := services[d.service].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("dynamographdeployment %s has no service %q (services: %s)",
			d.name, d.service, strings.Join(slices.Sorted(maps.Keys(services)), ", "))
	}
	return svc, nil
}

// envRefs finds every place the variable is set in svc: the service's
// envs and its main container's env, found by name.
func (d *dynamoSwitch) envRefs(svc map[string]any) []envRef {
	base := "/spec/services/" + jsonPointerEscape(d.service)
	var refs []envRef
	scan := func(list []any, ptr string) {
		for i, e := range list {
			em, ok := e.(map[string]any)
			if !ok || em["name"] != d.env {
				continue
			}
			r := envRef{path: fmt.Sprintf("%s/%d", ptr, i)}
			r.value, r.hasValue = em["value"].(string)
			_, r.valueFrom = em["valueFrom"]
			refs = append(refs, r)
		}
	}
	// The main container's env comes first: it is the more specific
	// setting, and Current reads the first.
	if list, ok, _ := unstructured.NestedSlice(svc, "extraPodSpec", "mainContainer", "env"); ok {
		scan(list, base+"/extraPodSpec/mainContainer/env")
	}
	if list, ok, _ := unstructured.NestedSlice(svc, "envs"); ok {
		scan(list, base+"/envs")
	}
	return refs
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// envPatch returns the JSON patch that sets the variable to value wherever
// it is set in svc (adding it to the service's envs when it is nowhere),
// and whether anything changes. Each replace is guarded by a test of the
// element's name, so a concurrent edit that moved the list makes the patch
// fail instead of overwriting another variable.
func (d *dynamoSwitch) envPatch(svc map[string]any, value string) ([]jsonPatchOp, bool, error) {
	refs := d.envRefs(svc)
	var ops []jsonPatchOp
	changed := false
	for _, r := range refs {
		if r.valueFrom {
			return nil, false, fmt.Errorf("env %s of service %s is set with valueFrom at %s; fleetbench can only switch a literal value", d.env, d.service, r.path)
		}
		if r.hasValue && r.value == value {
			continue
		}
		changed = true
		op := "replace"
		if !r.hasValue {
			op = "add"
		}
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: r.path + "/name", Value: d.env},
			jsonPatchOp{Op: op, Path: r.path + "/value", Value: value})
	}
	if len(refs) == 0 {
		changed = true
		base := "/spec/services/" + jsonPointerEscape(d.service) + "/envs"
		env := map[string]any{"name": d.env, "value": value}
		if _, ok := svc["envs"]; ok {
			ops = append(ops, jsonPatchOp{Op: "add", Path: base + "/-", Value: env})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: base, Value: []any{env}})
		}
	}
	return ops, changed, nil
}

// replicasOf returns a service's desired replicas (1 when unset).
func replicasOf(svc map[string]any) int {
	n, ok, _ := unstructured.NestedInt64(svc, "replicas")
	if !ok {
		return 1
	}
	return int(n)
}

// workerServices returns the services restart_workers restarts: the ones
// named, else every service but the switched one and those whose
// componentType is frontend, planner or epp.
func (d *dynamoSwitch) workerServices(dgd *unstructured.Unstructured) ([]string, error) {
	services, _, _ := unstructured.NestedMap(dgd.Object, "spec", "services")
	if len(d.workers) > 0 {
		for _, w := range d.workers {
			if _, ok := services[w]; !ok {
				return nil, fmt.Errorf("dynamographdeployment %s has no worker service %q", d.name, w)
			}
		}
		return d.workers, nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(services)) {
		svc, _ := services[name].(map[string]any)
		ct, _, _ := unstructured.NestedString(svc, "componentType")
		if name == d.service || ct == "frontend" || ct == "planner" || ct == "epp" {
			continue
		}
		out = append(out, name)
	}
	return out, nil
}

// Switch sets the variable on the service, lets the operator roll the
// service's pods (or deletes them itself with restart: always when nothing
// changed), restarts the workers when asked, and waits until every pod of
// the service is Ready with the new value in its spec, the restarted
// workers are Ready, and the DGD's Ready condition is True. The readiness
// gate that follows checks the model is served.
func (d *dynamoSwitch) Switch(ctx context.Context, mode string) error {
	if err := d.do(ctx, mode); err != nil {
		return fmt.Errorf("switch to mode %q: %w", mode, err)
	}
	return nil
}

func (d *dynamoSwitch) do(ctx context.Context, mode string) error {
	start := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, d.s.timeout, fmt.Errorf("switch timed out after %s", d.s.timeout))
	defer cancel()
	c, err := d.get()
	if err != nil {
		return err
	}
	res := c.dyn.Resource(DGDResource).Namespace(c.ns)
	value := d.values.value(mode)
	dgd, err := res.Get(ctx, d.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get dynamographdeployment %s/%s: %w", c.ns, d.name, err)
	}
	svc, err := d.serviceOf(dgd)
	if err != nil {
		return err
	}
	ops, changed, err := d.envPatch(svc, value)
	if err != nil {
		return err
	}
	if changed {
		body, err := json.Marshal(ops)
		if err != nil {
			return fmt.Errorf("encode patch: %w", err)
		}
		if dgd, err = res.Patch(ctx, d.name, types.JSONPatchType, body, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patch dynamographdeployment %s/%s: %w", c.ns, d.name, err)
		}
		d.log.Info("router mode set", "env", d.env, "value", value, "generation", dgd.GetGeneration())
	} else {
		d.log.Debug("router mode already set", "env", d.env, "value", value)
	}

	frontend := podSet{
		name:     d.service + " pods",
		selector: d.selectorOf(d.service),
		want:     replicasOf(svc),
		check:    d.checkPod(value),
	}
	if !changed && d.restart == RestartAlways {
		if frontend.old, err = deletePods(ctx, c.cs, c.ns, frontend.selector); err != nil {
			return err
		}
		d.log.Info("service pods restarted", "pods", len(frontend.old))
	}
	sets := []podSet{frontend}
	if d.restartWorkers {
		workers, err := d.workerServices(dgd)
		if err != nil {
			return err
		}
		services, _, _ := unstructured.NestedMap(dgd.Object, "spec", "services")
		for _, w := range workers {
			svc, _ := services[w].(map[string]any)
			ps := podSet{name: w + " pods", selector: d.selectorOf(w), want: replicasOf(svc)}
			if ps.old, err = deletePods(ctx, c.cs, c.ns, ps.selector); err != nil {
				return err
			}
			d.log.Info("worker pods restarted", "worker_service", w, "pods", len(ps.old))
			sets = append(sets, ps)
		}
	}

	err = poll(ctx, d.s.poll, "dynamographdeployment "+d.name, func(ctx context.Context) (bool, string, error) {
		for _, ps := range sets {
			if ok, why, err := ps.ready(ctx, c.cs, c.ns); !ok || err != nil {
				return false, why, err
			}
		}
		cur, err := res.Get(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			if err := transient(err); err != nil {
				return false, "", err
			}
			return false, err.Error(), nil
		}
		return d.dgdReady(cur)
	})
	if err != nil {
		return err
	}
	d.log.Info("routing mode switched", "mode", mode, "value", value, "changed", changed,
		"elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// checkPod returns a check that a pod's spec carries the variable with
// value in every container that sets it, and in at least one.
func (d *dynamoSwitch) checkPod(value string) func(*corev1.Pod) string {
	return func(p *corev1.Pod) string {
		found := false
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if e.Name != d.env {
					continue
				}
				if e.Value != value {
					return fmt.Sprintf("container %s has %s=%q, want %q", c.Name, d.env, e.Value, value)
				}
				found = true
			}
		}
		if !found {
			return fmt.Sprintf("no container sets %s", d.env)
		}
		return ""
	}
}

// dgdReady reports whether the DGD's ready condition is True for its
// current generation.
func (d *dynamoSwitch) dgdReady(dgd *unstructured.Unstructured) (bool, string, error) {
	conds, _, _ := unstructured.NestedSlice(dgd.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok || cm["type"] != d.readyCondition {
			continue
		}
		if cm["status"] != string(metav1.ConditionTrue) {
			return false, fmt.Sprintf("dynamographdeployment %s: %s is %v: %v", d.name, d.readyCondition, cm["status"], cm["message"]), nil
		}
		// An operator that records the generation it judged must have
		// judged this one; a Ready from before the patch says nothing.
		if og, ok, _ := unstructured.NestedInt64(cm, "observedGeneration"); ok && og > 0 && og < dgd.GetGeneration() {
			return false, fmt.Sprintf("dynamographdeployment %s: %s is for generation %d, not %d", d.name, d.readyCondition, og, dgd.GetGeneration()), nil
		}
		return true, "", nil
	}
	state, _, _ := unstructured.NestedString(dgd.Object, "status", "state")
	return false, fmt.Sprintf("dynamographdeployment %s: no %s condition (state %q)", d.name, d.readyCondition, state), nil
}

// Current reads the variable from the service's spec (the main container's
// env first, then the service's envs, then the graph's envs) and returns
// the mode it maps to.
func (d *dynamoSwitch) Current(ctx context.Context) (string, error) {
	c, err := d.get()
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	dgd, err := c.dyn.Resource(DGDResource).Namespace(c.ns).Get(ctx, d.name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read current mode: get dynamographdeployment %s/%s: %w", c.ns, d.name, err)
	}
	svc, err := d.serviceOf(dgd)
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	if refs := d.envRefs(svc); len(refs) > 0 {
		// The first place the variable is set is what the pods get.
		if refs[0].valueFrom {
			return "", fmt.Errorf("read current mode: env %s is set with valueFrom", d.env)
		}
		return d.values.mode(refs[0].value), nil
	}
	if list, ok, _ := unstructured.NestedSlice(dgd.Object, "spec", "envs"); ok {
		for _, e := range list {
			if em, ok := e.(map[string]any); ok && em["name"] == d.env {
				v, _ := em["value"].(string)
				return d.values.mode(v), nil
			}
		}
	}
	return "", fmt.Errorf("read current mode: env %s on service %s or the graph: %w", d.env, d.service, ErrNotSet)
}
