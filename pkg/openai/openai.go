package openai

import "encoding/json"

// Role names used in chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Object names in response bodies.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectTextCompletion      = "text_completion"
	ObjectModel               = "model"
	ObjectList                = "list"
)

// Finish reasons.
const (
	FinishStop   = "stop"
	FinishLength = "length"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// StreamOptions asks a streaming server for extra data; IncludeUsage makes it
// send a final chunk with usage and no choices.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatCompletionRequest is the body of POST /v1/chat/completions. MinTokens
// and IgnoreEOS are vLLM extensions that other servers ignore.
type ChatCompletionRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	MaxTokens     *int           `json:"max_tokens,omitempty"`
	MinTokens     *int           `json:"min_tokens,omitempty"`
	IgnoreEOS     *bool          `json:"ignore_eos,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	Seed          *int64         `json:"seed,omitempty"`
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	MaxTokens     *int           `json:"max_tokens,omitempty"`
	MinTokens     *int           `json:"min_tokens,omitempty"`
	IgnoreEOS     *bool          `json:"ignore_eos,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	Seed          *int64         `json:"seed,omitempty"`
}

// PromptTokensDetails breaks down prompt tokens; CachedTokens counts those
// served from the prefix cache.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Usage reports token counts for one request.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// Delta is the incremental part of a streamed chat choice. ReasoningContent
// is sent by reasoning models (vLLM and others also use "reasoning").
type Delta struct {
	Role             string `json:"role,omitempty"`
	Content          string `json:"content,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Reasoning        string `json:"reasoning,omitempty"`
}

// ChunkChoice is one choice in a streamed chunk. Chat chunks fill Delta,
// completion chunks fill Text.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        *Delta  `json:"delta,omitempty"`
	Text         string  `json:"text,omitempty"`
	FinishReason *string `json:"finish_reason"`
}

// Chunk is one streamed event of either endpoint. Error is set when a server
// reports a failure inside an open stream.
type Chunk struct {
	ID      string        `json:"id,omitempty"`
	Object  string        `json:"object,omitempty"`
	Created int64         `json:"created,omitempty"`
	Model   string        `json:"model,omitempty"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	Error   *ErrorDetail  `json:"error,omitempty"`
}

// Choice is one choice of a non-streaming response.
type Choice struct {
	Index        int      `json:"index"`
	Message      *Message `json:"message,omitempty"`
	Text         string   `json:"text,omitempty"`
	FinishReason string   `json:"finish_reason"`
}

// Completion is a non-streaming response of either endpoint.
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// ErrorDetail describes a failure. Code is a number in vLLM's bodies and a
// string in some other servers', so it is kept raw.
type ErrorDetail struct {
	Message string          `json:"message"`
	Type    string          `json:"type,omitempty"`
	Param   *string         `json:"param,omitempty"`
	Code    json.RawMessage `json:"code,omitempty"`
}

// ErrorResponse is the body of a non-200 response in the OpenAI layout,
// {"error": {...}}, which current vLLM also uses.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}
