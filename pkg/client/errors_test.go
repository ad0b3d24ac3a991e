package client

import (
	"strings"
	"testing"
)

// TestCleanCutsAtWords checks that a server's message is kept whole up to
// the bound and, past it, cut after a whole word with an ellipsis.
func TestCleanCutsAtWords(t *testing.T) {
	long := strings.Repeat("context length exceeded, ", 40) // 1,000 bytes
	tests := []struct {
		name, in, want string
	}{
		{name: "short kept whole", in: vllmContextLengthMessage, want: vllmContextLengthMessage},
		{name: "control characters", in: "line one\nline two\t", want: "line one line two"},
		{name: "long cut at a word", in: long, want: strings.Repeat("context length exceeded, ", 20) + "context..."},
		{name: "long without spaces", in: strings.Repeat("x", 600), want: strings.Repeat("x", maxErrorMessage) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clean(tt.in)
			if got != tt.want {
				t.Errorf("clean = %q (%d bytes), want %q (%d bytes)", got, len(got), tt.want, len(tt.want))
			}
		})
	}
}

// TestStreamErrorClass checks the class of in-stream error objects by
// their code and type, against statusClass's classes.
func TestStreamErrorClass(t *testing.T) {
	tests := []struct {
		code, typ string
		want      Class
	}{
		{"400", "BadRequestError", ClassBadRequest},
		{"401", "", ClassAuth},
		{"403", "", ClassAuth},
		{"404", "NotFoundError", ClassNotFound},
		{"408", "", ClassTimeout},
		{"429", "", ClassRateLimited},
		{"422", "", ClassHTTP4xx},
		{"500", "", ClassHTTP5xx},
		{"504", "", ClassTimeout},
		{"rate_limit_exceeded", "requests", ClassRateLimited},
		{"invalid_api_key", "invalid_request_error", ClassAuth},
		{"", "BadRequestError", ClassBadRequest},
		{"", "", ClassProtocol},
		{"7", "RateLimitError", ClassProtocol}, // a number that is no status decides
		{"something_else", "Weird", ClassProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.code+"/"+tt.typ, func(t *testing.T) {
			if got := (&StreamError{Code: tt.code, Type: tt.typ}).Class(); got != tt.want {
				t.Errorf("Class() = %q, want %q", got, tt.want)
			}
		})
	}
}
