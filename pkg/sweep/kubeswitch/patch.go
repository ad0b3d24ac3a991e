package kubeswitch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// Patch types of the patch switch's patch_type option.
const (
	PatchMerge     = "merge"
	PatchJSON      = "json"
	PatchStrategic = "strategic"
)

// patchSwitch patches one object with a template in which {mode} is
// replaced, then optionally rollout-restarts a Deployment and waits for a
// Deployment's rollout.
type patchSwitch struct {
	conn
	gvr       schema.GroupVersionResource
	name      string
	patch     string
	patchType types.PatchType
	values    valueMap
	current   fieldPath
	restart   string
	wait      string
	log       hclog.Logger
}

var (
	_ sweep.Switcher   = (*patchSwitch)(nil)
	_ sweep.ModeReader = (*patchSwitch)(nil)
)

func newPatch(cfg sweep.SwitchSpec, o *optionSet, s settings, log hclog.Logger) (*patchSwitch, error) {
	if err := checkFields(cfg, "timeout"); err != nil {
		return nil, err
	}
	p := &patchSwitch{
		conn: conn{s: s},
		gvr: schema.GroupVersionResource{
			Group:    o.str("group", ""),
			Version:  o.str("version", "v1"),
			Resource: o.required("resource", "deployments"),
		},
		name:    o.required("name", "router"),
		patch:   o.raw("patch"),
		values:  o.values("values", nil),
		restart: o.str("restart_deployment", ""),
		wait:    o.str("wait_deployment", ""),
	}
	if p.gvr.Resource != strings.ToLower(p.gvr.Resource) {
		o.errorf("option resource %q: want the lower-case plural, e.g. deployments", p.gvr.Resource)
	}
	switch o.oneOf("patch_type", PatchMerge, PatchMerge, PatchJSON, PatchStrategic) {
	case PatchJSON:
		p.patchType = types.JSONPatchType
	case PatchStrategic:
		p.patchType = types.StrategicMergePatchType
	default:
		p.patchType = types.MergePatchType
	}
	if strings.TrimSpace(p.patch) == "" {
		o.errorf(`option patch is required, e.g. patch: '{"spec":{"mode":"{mode}"}}'`)
	} else if _, err := p.render("mode"); err != nil {
		o.errorf("option patch: %w", err)
	}
	if cur := o.str("current", ""); cur != "" {
		fp, err := parsePath(cur)
		if err != nil {
			o.errorf("option current: %w", err)
		}
		p.current = fp
	}
	if p.wait == "" {
		p.wait = p.restart
		if p.gvr.Group == "apps" && p.gvr.Resource == "deployments" {
			p.wait = p.name
		}
	}
	if err := o.finish(); err != nil {
		return nil, err
	}
	p.log = log.With("resource", p.gvr.String(), "name", p.name)
	return p, nil
}

// render returns the patch for mode as JSON: {mode} replaced by the mode's
// value (escaped for a JSON string), YAML turned into JSON, and a JSON
// patch checked to be a list of operations.
func (p *patchSwitch) render(mode string) ([]byte, error) {
	text := strings.ReplaceAll(p.patch, "{mode}", jsonInner(p.values.value(mode)))
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("parse patch: %w", err)
	}
	if p.patchType == types.JSONPatchType {
		var ops []map[string]any
		if err := json.Unmarshal(j, &ops); err != nil {
			return nil, errors.New("a json patch must be a list of operations, e.g. [{op: replace, path: /spec/mode, value: \"{mode}\"}]")
		}
	} else {
		var obj map[string]any
		if err := json.Unmarshal(j, &obj); err != nil {
			return nil, fmt.Errorf("a %s patch must be an object", p.patchType)
		}
	}
	return j, nil
}

// Switch applies the patch, restarts the Deployment restart_deployment
// names, and waits until the Deployment wait_deployment names has rolled
// out.
func (p *patchSwitch) Switch(ctx context.Context, mode string) error {
	if err := p.do(ctx, mode); err != nil {
		return fmt.Errorf("switch to mode %q: %w", mode, err)
	}
	return nil
}

func (p *patchSwitch) do(ctx context.Context, mode string) error {
	start := time.Now()
	body, err := p.render(mode)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, p.s.timeout, fmt.Errorf("switch timed out after %s", p.s.timeout))
	defer cancel()
	c, err := p.get()
	if err != nil {
		return err
	}
	obj, err := c.dyn.Resource(p.gvr).Namespace(c.ns).Patch(ctx, p.name, p.patchType, body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch %s %s/%s: %w", p.gvr.Resource, c.ns, p.name, err)
	}
	p.log.Info("patched", "value", p.values.value(mode), "generation", obj.GetGeneration())
	if p.restart != "" {
		if err := restartDeployment(ctx, c.cs, c.ns, p.restart, time.Now()); err != nil {
			return err
		}
		p.log.Info("deployment restarted", "deployment", p.restart)
	}
	if p.wait != "" {
		err := poll(ctx, p.s.poll, "deployment "+p.wait+" rollout", func(ctx context.Context) (bool, string, error) {
			return rolledOut(ctx, c.cs, c.ns, p.wait)
		})
		if err != nil {
			return err
		}
	}
	p.log.Info("routing mode switched", "mode", mode, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// Current reads the field the current option names and returns the mode
// its value maps to; sweep.ErrNoCurrent without that option.
func (p *patchSwitch) Current(ctx context.Context) (string, error) {
	if p.current == nil {
		return "", sweep.ErrNoCurrent
	}
	c, err := p.get()
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	obj, err := c.dyn.Resource(p.gvr).Namespace(c.ns).Get(ctx, p.name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read current mode: get %s %s/%s: %w", p.gvr.Resource, c.ns, p.name, err)
	}
	v, err := p.current.lookupString(obj.Object)
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	return p.values.mode(v), nil
}
