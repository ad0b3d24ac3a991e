package sweep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written in files as a Go duration string
// ("60s", "1m30s"). A bare number is rejected rather than guessed at: 60 could
// mean seconds or nanoseconds. It is a plain value, safe to copy and share.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns the Go form, e.g. "1m0s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText returns String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(bytes.TrimSpace(b)))
	if err != nil {
		return fmt.Errorf("parse duration %q: want a Go duration such as \"60s\" or \"1m30s\"", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON accepts only a JSON string holding a Go duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("parse duration %s: want a string with a unit such as \"60s\"", b)
	}
	return d.UnmarshalText([]byte(s))
}
