package main

import (
	"context"
	"flag"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
)

// kubeFlags binds kubejob's options (--kube-agents and the agent flags) to
// a command's flag set.
type kubeFlags struct {
	fs   *flag.FlagSet
	opts kubejob.Options
}

// addKubeFlags registers the --kube-agents flags on fs.
func addKubeFlags(fs *flag.FlagSet) *kubeFlags {
	f := &kubeFlags{fs: fs}
	pfs := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
	f.opts.AddFlags(pfs)
	addPFlags(fs, pfs)
	return f
}

// options returns the parsed options with agents as the agent count (the
// command's --agents, a sweep's from its spec), marked as given when
// --agents was on the command line: only then does it win over
// --agent-capacity.
func (f *kubeFlags) options(agents int) kubejob.Options {
	o := f.opts
	o.Agents = agents
	f.fs.Visit(func(fl *flag.Flag) { o.AgentsSet = o.AgentsSet || fl.Name == "agents" })
	return o
}

// startKube starts the agents o asks for, sized by cfg's stages, and sets
// cfg.Agents to their count. The context it returns is canceled when the
// agents cannot run (see kubejob.Cause); defer the agents' Stop. Without
// --kube-agents it returns ctx and nil agents, whose Stop does nothing.
func startKube(ctx context.Context, logger hclog.Logger, o kubejob.Options, cfg *coordinator.Config) (context.Context, *kubejob.Agents, error) {
	if !o.Enabled {
		return ctx, nil, nil
	}
	maxLevel := 0
	for _, s := range cfg.Stages {
		maxLevel = max(maxLevel, s.Level)
	}
	ctx, agents, err := kubejob.Start(ctx, logger, o, maxLevel)
	if err != nil {
		return ctx, nil, err
	}
	cfg.Agents = agents.Count()
	return ctx, agents, nil
}

// forwardLosses tells co about every agent loss on losses until ctx ends;
// wait waits for that. losses may be nil.
func forwardLosses(ctx context.Context, co *coordinator.Coordinator, losses <-chan kubejob.Loss) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case l := <-losses:
				// ErrRunOver or ctx's end: nothing is left to tell.
				_ = co.AgentLost(ctx, l.ID, l.Reason)
			}
		}
	}()
	return func() { <-done }
}

// addPFlags registers every flag of pfs on fs, sharing its value, so the
// commands still on the standard flag package take flags declared with
// pflag.
func addPFlags(fs *flag.FlagSet, pfs *pflag.FlagSet) {
	pfs.VisitAll(func(pfl *pflag.Flag) {
		var v flag.Value = pfl.Value
		if _, ok := pfl.Value.(pflag.SliceValue); ok {
			v = stdList{pfl.Value}
		} else if pfl.NoOptDefVal == "true" { // pflag's mark of a bool flag
			v = stdBool{pfl.Value}
		}
		fs.Var(v, pfl.Name, pfl.Usage)
	})
}

// stdBool is a pflag bool value the standard parser accepts without a
// value ("--kube-agents"). Its zero value prints as false, so help shows
// no default for a false one.
type stdBool struct{ pflag.Value }

func (b stdBool) IsBoolFlag() bool { return true }

func (b stdBool) String() string {
	if b.Value == nil {
		return "false"
	}
	return b.Value.String()
}

// stdList is a repeatable pflag value. It prints as "a,b" rather than
// pflag's "[a,b]", and its zero value prints as "" (pflag's would panic
// in flag.PrintDefaults), so help shows no default for an empty list.
type stdList struct{ pflag.Value }

func (l stdList) String() string {
	if l.Value == nil {
		return ""
	}
	return strings.Join(l.Value.(pflag.SliceValue).GetSlice(), ",")
}
