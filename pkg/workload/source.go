package workload

import (
	"fmt"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/hashicorp/go-hclog"
)

// New builds the Source cfg describes, reading its files now so errors show
// before a run starts. asker is used only by docchat with a user model.
// The returned Source is safe for concurrent use.
func New(cfg Config, logger hclog.Logger, asker Asker) (Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named("workload")
	switch cfg.Kind {
	case KindShareGPT:
		s, st, err := LoadShareGPT(cfg.Dataset, cfg.ShareGPT(), logger.Named("sharegpt"))
		if err != nil {
			return nil, err
		}
		logger.Info("loaded sharegpt", "path", cfg.Dataset, "conversations", st.Kept, "entries", st.Entries, "filtered", st.Filtered)
		return s, nil
	case KindJSONL:
		s, err := LoadJSONL(cfg.Dataset, cfg.Seed, cfg.Think)
		if err != nil {
			return nil, err
		}
		if cfg.MaxTokens > 0 {
			s.maxTokens = cfg.MaxTokens
		}
		logger.Info("loaded jsonl", "path", cfg.Dataset, "conversations", s.Len())
		return s, nil
	default:
		return NewDocChat(cfg.DocChat(), logger, asker)
	}
}

// Open is New with the user model's client made here when cfg has one:
// what every command and agent calls, so all of them ask the user model the
// same way. The client lives as long as the returned Source.
func Open(cfg Config, logger hclog.Logger) (Source, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	var asker Asker
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
	src, err := New(cfg, logger, asker)
	if err != nil {
		return nil, fmt.Errorf("load workload: %w", err)
	}
	return src, nil
}
