package workload

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
)

// Source kinds accepted by Config.Kind.
const (
	KindDocChat  = "docchat"
	KindShareGPT = "sharegpt"
	KindJSONL    = "jsonl"
)

// Config selects and configures a Source from command-line style settings.
// Fields that do not apply to Kind are ignored.
type Config struct {
	// Kind is "docchat" (default), "sharegpt" or "jsonl".
	Kind string
	// Path is the dataset file for sharegpt and jsonl, and the optional
	// directory of documents for docchat.
	Path string
	// Seed makes every conversation reproducible.
	Seed int64
	// MaxTokens caps every turn's output; 0 leaves the run's default.
	// JSONL turns with their own max_tokens keep theirs.
	MaxTokens int
	// Think is the pause before each turn after the first. JSONL turns with
	// their own think_ms keep theirs.
	Think ThinkTime

	// Docchat: see DocChatConfig.
	Documents    int
	PromptTokens int
	MinTurns     int
	// MaxTurns bounds docchat turns, and caps ShareGPT turns (0 = all).
	MaxTurns  int
	UserModel *UserModelConfig

	// ShareGPT: see ShareGPTConfig.
	MaxConversations int
	MinMessages      int
	Shuffle          bool
	OutputLen        bool
}

// DocChat returns the docchat part of c.
func (c Config) DocChat() DocChatConfig {
	return DocChatConfig{
		Seed: c.Seed, Documents: c.Documents, PromptTokens: c.PromptTokens, Dir: c.Path,
		MinTurns: c.MinTurns, MaxTurns: c.MaxTurns, MaxTokens: c.MaxTokens, Think: c.Think,
		UserModel: c.UserModel,
	}
}

// ShareGPT returns the ShareGPT part of c.
func (c Config) ShareGPT() ShareGPTConfig {
	return ShareGPTConfig{
		Seed: c.Seed, Shuffle: c.Shuffle, MaxConversations: c.MaxConversations,
		MinMessages: c.MinMessages, MaxTurns: c.MaxTurns, MaxTokens: c.MaxTokens,
		OutputLen: c.OutputLen, Think: c.Think,
	}
}

// Validate reports settings that cannot work, without reading files.
func (c Config) Validate() error {
	switch c.Kind {
	case "", KindDocChat:
		return c.DocChat().WithDefaults().Validate()
	case KindShareGPT:
		if c.Path == "" {
			return fmt.Errorf("workload sharegpt: path is empty")
		}
		return c.ShareGPT().Validate()
	case KindJSONL:
		if c.Path == "" {
			return fmt.Errorf("workload jsonl: path is empty")
		}
		if c.MaxTokens < 0 {
			return fmt.Errorf("workload jsonl: max tokens is negative")
		}
		return c.Think.Validate()
	default:
		return fmt.Errorf("unknown workload kind %q (want %s, %s or %s)", c.Kind, KindDocChat, KindShareGPT, KindJSONL)
	}
}

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
		s, st, err := LoadShareGPT(cfg.Path, cfg.ShareGPT(), logger.Named("sharegpt"))
		if err != nil {
			return nil, err
		}
		logger.Info("loaded sharegpt", "path", cfg.Path, "conversations", st.Kept, "entries", st.Entries, "filtered", st.Filtered)
		return s, nil
	case KindJSONL:
		s, err := LoadJSONL(cfg.Path, cfg.Seed, cfg.Think)
		if err != nil {
			return nil, err
		}
		if cfg.MaxTokens > 0 {
			s.maxTokens = cfg.MaxTokens
		}
		logger.Info("loaded jsonl", "path", cfg.Path, "conversations", s.Len())
		return s, nil
	default:
		return NewDocChat(cfg.DocChat(), logger, asker)
	}
}
