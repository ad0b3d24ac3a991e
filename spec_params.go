package main

import (
	"fmt"
	"strconv"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/workload"
	"github.com/hashicorp/go-hclog"
)

// Keys of coordinator.Spec.Params, by the flag they come from. The
// coordinator passes them to every agent unchanged; a remote agent builds
// its workload from them (workloadConfig), so it runs the very
// conversations a local engine would for the same seed.
const (
	paramDataset          = "dataset"
	paramThinkTime        = "think-time"
	paramDocuments        = "documents"
	paramPromptTokens     = "prompt-tokens"
	paramMinTurns         = "min-turns"
	paramMaxTurns         = "max-turns"
	paramMaxConversations = "max-conversations"
	paramMinMessages      = "min-messages"
	paramShuffle          = "shuffle"
	paramOutputLen        = "output-len"
	paramEndpoint         = "endpoint"
	paramUserModelURL     = "user-model-url"
	paramUserModel        = "user-model"
	paramUserModelKeyEnv  = "user-model-key-env"
)

// workloadParams encodes the settings of cfg that the coordinator's Spec
// has no field for (Kind, Seed and MaxTokens have one). A user model
// (docchat follow-ups written by a model) travels as its URL, model and the
// name of the environment variable with its key; each agent reads the key
// from its own environment.
func workloadParams(cfg workload.Config) map[string]string {
	p := map[string]string{paramThinkTime: cfg.Think.String()}
	set := func(k string, v int) {
		if v != 0 {
			p[k] = strconv.Itoa(v)
		}
	}
	if cfg.Path != "" {
		p[paramDataset] = cfg.Path
	}
	set(paramDocuments, cfg.Documents)
	set(paramPromptTokens, cfg.PromptTokens)
	set(paramMinTurns, cfg.MinTurns)
	set(paramMaxTurns, cfg.MaxTurns)
	set(paramMaxConversations, cfg.MaxConversations)
	set(paramMinMessages, cfg.MinMessages)
	if cfg.Shuffle {
		p[paramShuffle] = "true"
	}
	if cfg.OutputLen {
		p[paramOutputLen] = "true"
	}
	if um := cfg.UserModel; um != nil {
		p[paramUserModelURL], p[paramUserModel] = um.URL, um.Model
		if um.APIKeyEnv != "" {
			p[paramUserModelKeyEnv] = um.APIKeyEnv
		}
	}
	return p
}

// workloadConfig decodes a spec's workload (workloadParams' inverse).
func workloadConfig(kind string, seed int64, maxTokens int, params map[string]string) (workload.Config, error) {
	think, err := workload.ParseThinkTime(params[paramThinkTime])
	if err != nil {
		return workload.Config{}, fmt.Errorf("parse think time: %w", err)
	}
	cfg := workload.Config{Kind: kind, Path: params[paramDataset], Seed: seed, MaxTokens: maxTokens, Think: think}
	for k, dst := range map[string]*int{
		paramDocuments: &cfg.Documents, paramPromptTokens: &cfg.PromptTokens, paramMinTurns: &cfg.MinTurns,
		paramMaxTurns: &cfg.MaxTurns, paramMaxConversations: &cfg.MaxConversations, paramMinMessages: &cfg.MinMessages,
	} {
		v, ok := params[k]
		if !ok {
			continue
		}
		if *dst, err = strconv.Atoi(v); err != nil {
			return workload.Config{}, fmt.Errorf("parse spec parameter %s=%q: %w", k, v, err)
		}
	}
	for k, dst := range map[string]*bool{paramShuffle: &cfg.Shuffle, paramOutputLen: &cfg.OutputLen} {
		v, ok := params[k]
		if !ok {
			continue
		}
		if *dst, err = strconv.ParseBool(v); err != nil {
			return workload.Config{}, fmt.Errorf("parse spec parameter %s=%q: %w", k, v, err)
		}
	}
	if u := params[paramUserModelURL]; u != "" {
		cfg.UserModel = &workload.UserModelConfig{URL: u, Model: params[paramUserModel], APIKeyEnv: params[paramUserModelKeyEnv]}
	}
	return cfg, nil
}

// newWorkloadSource builds the workload of cfg, with a client for its user
// model when it has one.
func newWorkloadSource(cfg workload.Config, logger hclog.Logger) (workload.Source, error) {
	var asker workload.Asker
	if um := cfg.UserModel; um != nil {
		if err := um.Validate(); err != nil {
			return nil, err
		}
		ac, err := client.New(um.ClientConfig(), logger.Named("user_model"))
		if err != nil {
			return nil, fmt.Errorf("create user model client: %w", err)
		}
		asker = ac
	}
	src, err := workload.New(cfg, logger, asker)
	if err != nil {
		return nil, fmt.Errorf("load workload: %w", err)
	}
	return src, nil
}

// fleetSpec is the coordinator's spec for a fleet whose agents build their
// workload from wcfg.
func fleetSpec(target, model, endpoint, sessionHeader string, wcfg workload.Config) coordinator.Spec {
	params := workloadParams(wcfg)
	if endpoint != "" {
		params[paramEndpoint] = endpoint
	}
	return coordinator.Spec{
		Target: target, Model: model, Workload: wcfg.Kind, Seed: wcfg.Seed, MaxTokens: wcfg.MaxTokens,
		SessionHeader: sessionHeader, Params: params,
	}
}
