package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/hashicorp/go-hclog"
)

// Document-chat defaults.
const (
	DefaultDocuments    = 10
	DefaultPromptTokens = 3100
	DefaultMinTurns     = 3
	DefaultMaxTurns     = 5
	// MinPromptTokens is the smallest PromptTokens accepted: below it the
	// system prompt and question leave no room for a document.
	MinPromptTokens = 256
)

// DocChatConfig configures document chats: each conversation picks one of a
// few starter documents, asks a first question about it, and follows up for
// a number of turns. Conversations sharing a document share the cached prefix
// (system prompt + document), which is what KV-cache-aware routing exploits.
type DocChatConfig struct {
	// Seed makes the documents and every conversation reproducible.
	Seed int64
	// Documents is how many starter documents to generate (default 10).
	// With Dir it caps the files used (0 = all files).
	Documents int
	// PromptTokens is the first request's prompt size in cl100k_base tokens:
	// system prompt + document + first question (default 3100). Server
	// counts add the chat template's tokens and differ by tokenizer.
	PromptTokens int
	// Dir, when set, is a directory whose .txt and .md files (sorted by
	// name) are the documents instead of generated ones. Files longer than
	// the PromptTokens budget are cut at a token boundary; shorter ones are
	// used as they are.
	Dir string
	// MinTurns and MaxTurns bound each conversation's user turns (default
	// 3 and 5); the count is drawn uniformly per conversation.
	MinTurns, MaxTurns int
	// MaxTokens caps every turn's output; 0 leaves the run's default.
	MaxTokens int
	// Answers is the length of each answer: drawn per turn from the
	// published distribution and sent as the turn's max_tokens (capped at
	// MaxTokens) unless Answers.Natural is set.
	Answers AnswerLength
	// Think is the pause before each turn after the first.
	Think ThinkTime
	// UserModel, when set, writes follow-up questions with a second model.
	UserModel *UserModelConfig
}

// WithDefaults returns c with zero fields set to their defaults.
func (c DocChatConfig) WithDefaults() DocChatConfig {
	if c.Documents == 0 && c.Dir == "" {
		c.Documents = DefaultDocuments
	}
	if c.PromptTokens == 0 {
		c.PromptTokens = DefaultPromptTokens
	}
	if c.MinTurns == 0 && c.MaxTurns == 0 {
		c.MinTurns, c.MaxTurns = DefaultMinTurns, DefaultMaxTurns
	}
	if c.MinTurns == 0 {
		c.MinTurns = 1
	}
	if c.MaxTurns == 0 {
		c.MaxTurns = max(c.MinTurns, DefaultMaxTurns)
	}
	if c.UserModel != nil {
		um := c.UserModel.WithDefaults()
		c.UserModel = &um
	}
	c.Answers = c.Answers.WithDefaults()
	return c
}

// Validate reports settings that cannot work. Call it on WithDefaults' result.
func (c DocChatConfig) Validate() error {
	switch {
	case c.Documents < 0 || (c.Documents == 0 && c.Dir == ""):
		return fmt.Errorf("docchat: documents must be at least 1, got %d", c.Documents)
	case c.PromptTokens < MinPromptTokens:
		return fmt.Errorf("docchat: prompt tokens must be at least %d, got %d", MinPromptTokens, c.PromptTokens)
	case c.MinTurns < 1:
		return fmt.Errorf("docchat: min turns must be at least 1, got %d", c.MinTurns)
	case c.MaxTurns < c.MinTurns:
		return fmt.Errorf("docchat: max turns %d is below min turns %d", c.MaxTurns, c.MinTurns)
	case c.MaxTokens < 0:
		return fmt.Errorf("docchat: max tokens is negative")
	}
	if err := c.Think.Validate(); err != nil {
		return fmt.Errorf("docchat: %w", err)
	}
	if err := c.Answers.Validate(); err != nil {
		return fmt.Errorf("docchat: %w", err)
	}
	if c.UserModel != nil {
		if err := c.UserModel.Validate(); err != nil {
			return fmt.Errorf("docchat: %w", err)
		}
	}
	return nil
}

// document is one starter document, immutable once built.
type document struct {
	title    string
	sections []string // section names that appear in the text
	terms    []string // components the text talks about
	teams    []string
	// prefix is the first user message up to the question: the document
	// in <document> tags and a blank line. Every conversation on this
	// document sends exactly these bytes, so they form a shared prefix.
	prefix string
}

// DocChat is a Source of document chats. It is safe for concurrent use: the
// documents are immutable after construction and every conversation draws
// from its own generators.
type DocChat struct {
	cfg    DocChatConfig
	docs   []*document
	asker  Asker
	logger hclog.Logger

	fallbacks atomic.Int64
	warnOnce  sync.Once
}

var _ Source = (*DocChat)(nil)

// NewDocChat builds the starter documents (generated from cfg.Seed, or read
// from cfg.Dir) and returns the source. asker is required when cfg.UserModel
// is set and ignored otherwise.
func NewDocChat(cfg DocChatConfig, logger hclog.Logger, asker Asker) (*DocChat, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.UserModel != nil && asker == nil {
		return nil, errors.New("docchat: user model configured but no asker given")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	d := &DocChat{cfg: cfg, asker: asker, logger: logger.Named("docchat")}
	if cfg.UserModel == nil {
		d.asker = nil
	}
	var err error
	if cfg.Dir != "" {
		d.docs, err = readDocuments(cfg, d.logger)
	} else {
		d.docs = generateDocuments(cfg)
	}
	if err != nil {
		return nil, err
	}
	d.logger.Debug("built documents", "count", len(d.docs), "prompt_tokens", cfg.PromptTokens, "user_model", cfg.UserModel != nil)
	return d, nil
}

// Name returns "docchat".
func (d *DocChat) Name() string { return "docchat" }

// Fallbacks returns how many follow-ups fell back to a template because the
// user model failed or answered nothing.
func (d *DocChat) Fallbacks() int64 { return d.fallbacks.Load() }

// SystemPrompt returns the system prompt every document chat uses.
func (d *DocChat) SystemPrompt() string { return docSystemPrompt }

// Conversation returns conversation i. It is a pure function of (seed, i).
func (d *DocChat) Conversation(i int) Conversation {
	r := convRand(d.cfg.Seed, i)
	c := &docConv{src: d, index: i}
	c.doc = d.docs[r.IntN(len(d.docs))]
	c.turns = d.cfg.MinTurns + r.IntN(d.cfg.MaxTurns-d.cfg.MinTurns+1)
	c.first = r.IntN(len(firstQuestions))
	// Follow-ups walk the template list with a stride coprime to its length,
	// so a conversation repeats no template before using them all, without
	// allocating a permutation per conversation.
	c.start = r.IntN(len(followUps))
	c.stride = followUpStrides[r.IntN(len(followUpStrides))]
	return c
}

// followUpStrides are the strides coprime to len(followUps).
var followUpStrides = func() []int {
	var s []int
	for k := 1; k < len(followUps); k++ {
		if gcd(k, len(followUps)) == 1 {
			s = append(s, k)
		}
	}
	return s
}()

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

type docConv struct {
	src           *DocChat
	index         int
	doc           *document
	turns         int
	first         int
	start, stride int
}

func (c *docConv) Index() int     { return c.index }
func (c *docConv) System() string { return docSystemPrompt }
func (c *docConv) Turns() int     { return c.turns }

// Next returns turn k. Turn 0 is the document followed by the first question;
// later turns are follow-ups from the user model, or from templates.
func (c *docConv) Next(ctx context.Context, k int, history []openai.Message) (Turn, error) {
	if err := ctx.Err(); err != nil {
		return Turn{}, err
	}
	if k < 0 || k >= c.turns {
		return Turn{}, fmt.Errorf("%w: turn %d of %d", ErrTurnRange, k, c.turns)
	}
	cfg := &c.src.cfg
	t := Turn{
		MaxTokens: cfg.Answers.tokens(turnRand(cfg.Seed, c.index, k, streamAnswer), cfg.MaxTokens),
		ThinkTime: cfg.Think.At(cfg.Seed, c.index, k),
	}
	r := turnRand(cfg.Seed, c.index, k, streamQuestion)
	if k == 0 {
		t.User = c.doc.prefix + c.doc.render(firstQuestions[c.first], r)
		return t, nil
	}
	template := func() string {
		return c.doc.render(followUps[(c.start+(k-1)*c.stride)%len(followUps)], r)
	}
	if c.src.asker == nil {
		t.User = template()
		return t, nil
	}
	q, err := c.src.ask(ctx, c.doc, history)
	if err != nil {
		if ctx.Err() != nil {
			return Turn{}, ctx.Err()
		}
		c.src.noteFallback(c.index, k, err)
		t.User, t.Fallback = template(), true
		return t, nil
	}
	t.User = q
	return t, nil
}

func (d *DocChat) noteFallback(conv, k int, err error) {
	d.fallbacks.Add(1)
	first := false
	d.warnOnce.Do(func() { first = true })
	if first {
		d.logger.Warn("user model failed, using template follow-ups where it fails", "conversation", conv, "turn", k, "error", err)
		return
	}
	d.logger.Debug("user model failed, using template", "conversation", conv, "turn", k, "error", err)
}

// render fills a question template with this document's names. Section and
// term choices come from r, the turn's own generator.
func (doc *document) render(tmpl string, r *rand.Rand) string {
	var sb strings.Builder
	sb.Grow(len(tmpl) + 64)
	s1 := r.IntN(len(doc.sections))
	s2 := r.IntN(len(doc.sections))
	if len(doc.sections) > 1 && s2 == s1 {
		s2 = (s1 + 1) % len(doc.sections)
	}
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			sb.WriteString(tmpl)
			return sb.String()
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			sb.WriteString(tmpl)
			return sb.String()
		}
		sb.WriteString(tmpl[:i])
		switch tmpl[i+1 : i+j] {
		case "title":
			sb.WriteString(doc.title)
		case "section":
			sb.WriteString(doc.sections[s1])
		case "section2":
			sb.WriteString(doc.sections[s2])
		case "term":
			sb.WriteString(doc.terms[r.IntN(len(doc.terms))])
		case "team":
			sb.WriteString(doc.teams[r.IntN(len(doc.teams))])
		default:
			sb.WriteString(tmpl[i : i+j+1])
		}
		tmpl = tmpl[i+j+1:]
	}
}

const (
	docOpen  = "<document>\n"
	docClose = "\n</document>\n\n"
)

// bodyBudget is the token budget for a document body: the prompt less the
// system prompt, the tags, and the mean first question for this document.
func bodyBudget(cfg DocChatConfig, doc *document) int {
	r := rand.New(rand.NewPCG(1, 2)) // only for section picks while measuring
	q := 0
	for _, t := range firstQuestions {
		q += Count(doc.render(t, r))
	}
	q /= len(firstQuestions)
	return cfg.PromptTokens - Count(docSystemPrompt) - Count(docOpen) - Count(docClose) - q
}

// generateDocuments builds cfg.Documents technical reports. Document j is a
// pure function of (seed, j).
func generateDocuments(cfg DocChatConfig) []*document {
	names := seedRand(cfg.Seed, streamDocument).Perm(len(codenames))
	docs := make([]*document, cfg.Documents)
	var wg sync.WaitGroup
	for j := range docs {
		wg.Go(func() {
			docs[j] = generateDocument(cfg, j, codenames[names[j%len(names)]])
		})
	}
	wg.Wait()
	return docs
}

func generateDocument(cfg DocChatConfig, j int, codename string) *document {
	r := seedRand(cfg.Seed, streamDocument, uint64(j)+1)
	system := systemsNames[r.IntN(len(systemsNames))]
	if j >= len(codenames) {
		// Past the codename list titles would share their first token;
		// a number keeps them apart from the second one on.
		codename += " " + strconv.Itoa(j/len(codenames)+1)
	}
	doc := &document{
		title: codename + " " + system + ": " + reportKinds[r.IntN(len(reportKinds))],
		terms: pick(r, components, 6),
		teams: pick(r, teams, 3),
	}
	planned := pick(r, sectionNames[1:], 7)
	planned = append([]string{sectionNames[0]}, planned...)
	doc.sections = planned
	budget := bodyBudget(cfg, doc)

	g := &proseGen{r: r, doc: doc, sections: planned}
	body := Build(budget, g.next)
	doc.sections = doc.sections[:0:0]
	for _, s := range planned {
		if strings.Contains(body, ". "+s+"\n") {
			doc.sections = append(doc.sections, s)
		}
	}
	if len(doc.sections) == 0 {
		doc.sections = planned[:1]
	}
	doc.prefix = docOpen + body + docClose
	return doc
}

// pick returns n distinct elements of list in random order.
func pick(r *rand.Rand, list []string, n int) []string {
	idx := r.Perm(len(list))[:min(n, len(list))]
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = list[k]
	}
	return out
}

// proseGen yields a report piece by piece: the title, then numbered sections
// of paragraphs of filled-in sentences.
type proseGen struct {
	r         *rand.Rand
	doc       *document
	sections  []string
	started   bool
	section   int // sections emitted
	paras     int // paragraphs left in the current section
	sentences int // sentences left in the current paragraph
}

func (g *proseGen) next() string {
	if !g.started {
		g.started = true
		return "# " + g.doc.title + "\n"
	}
	if g.sentences == 0 && g.paras == 0 {
		if g.section == len(g.sections) {
			// Out of planned sections: continue with numbered notes.
			g.sections = append(g.sections, "Additional Notes "+strconv.Itoa(g.section-len(g.doc.sections)+1))
		}
		name := g.sections[g.section]
		g.section++
		g.paras = 3 + g.r.IntN(3)
		g.sentences = 3 + g.r.IntN(4)
		return "\n## " + strconv.Itoa(g.section) + ". " + name + "\n"
	}
	if g.sentences == 0 {
		g.paras--
		if g.paras == 0 {
			return g.next()
		}
		g.sentences = 3 + g.r.IntN(4)
		return "\n"
	}
	g.sentences--
	s := g.sentence()
	if g.sentences == 0 {
		return s + "\n"
	}
	return s + " "
}

func (g *proseGen) sentence() string {
	r := g.r
	tmpl := sentenceTemplates[r.IntN(len(sentenceTemplates))]
	var sb strings.Builder
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			sb.WriteString(tmpl)
			return sb.String()
		}
		j := strings.IndexByte(tmpl[i:], '}')
		sb.WriteString(tmpl[:i])
		switch tmpl[i+1 : i+j] {
		case "period":
			sb.WriteString(periods[r.IntN(len(periods))])
		case "component":
			sb.WriteString(g.doc.terms[r.IntN(len(g.doc.terms))])
		case "component2":
			sb.WriteString(components[r.IntN(len(components))])
		case "metric":
			sb.WriteString(metrics[r.IntN(len(metrics))])
		case "team":
			sb.WriteString(g.doc.teams[r.IntN(len(g.doc.teams))])
		case "moved":
			sb.WriteString(movements[r.IntN(len(movements))])
		case "verbed":
			sb.WriteString(verbsPast[r.IntN(len(verbsPast))])
		case "goal":
			sb.WriteString(goals[r.IntN(len(goals))])
		case "reason":
			sb.WriteString(reasons[r.IntN(len(reasons))])
		case "Connective":
			sb.WriteString(connectives[r.IntN(len(connectives))])
		case "adjective":
			sb.WriteString(adjectives[r.IntN(len(adjectives))])
		case "n":
			sb.WriteString(strconv.Itoa(50 + r.IntN(9950)))
		case "pct":
			sb.WriteString(strconv.Itoa(2 + r.IntN(60)))
		case "ms":
			sb.WriteString(strconv.Itoa(5 + r.IntN(900)))
		}
		tmpl = tmpl[i+j+1:]
	}
}

// readDocuments loads .txt and .md files from cfg.Dir, sorted by name.
func readDocuments(cfg DocChatConfig, logger hclog.Logger) ([]*document, error) {
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("read document dir: %w", err)
	}
	var docs []*document
	for _, e := range entries { // os.ReadDir sorts by name
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".txt" && ext != ".md") {
			continue
		}
		if cfg.Documents > 0 && len(docs) == cfg.Documents {
			break
		}
		b, err := os.ReadFile(filepath.Join(cfg.Dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read document: %w", err)
		}
		text := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
		if text == "" {
			logger.Warn("skipping empty document", "file", e.Name())
			continue
		}
		doc := fileDocument(strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), text)
		budget := bodyBudget(cfg, doc)
		if budget < 1 {
			return nil, fmt.Errorf("docchat: prompt tokens %d leave no room for %s", cfg.PromptTokens, e.Name())
		}
		text = Truncate(text, budget)
		doc.prefix = docOpen + text + docClose
		docs = append(docs, doc)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("docchat: no non-empty .txt or .md files in %s", cfg.Dir)
	}
	return docs, nil
}

// fileDocument names a user-supplied document: its title is the first
// markdown heading or the file name, its sections the other headings.
func fileDocument(name, text string) *document {
	doc := &document{title: name, terms: []string{"main system"}, teams: []string{"engineering"}}
	for line := range strings.Lines(text) {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		if h == "" {
			continue
		}
		if strings.HasPrefix(line, "# ") && doc.title == name && len(doc.sections) == 0 {
			doc.title = h
			continue
		}
		if len(doc.sections) < 32 && !slices.Contains(doc.sections, h) {
			doc.sections = append(doc.sections, h)
		}
	}
	if len(doc.sections) == 0 {
		doc.sections = []string{"the introduction", "the conclusion"}
	}
	return doc
}
