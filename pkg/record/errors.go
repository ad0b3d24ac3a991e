package record

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// MaxErrorKinds bounds the distinct error messages a window keeps; later
// new ones are counted under OtherErrors, so memory stays bounded however
// the server varies its messages.
const MaxErrorKinds = 32

// OtherErrors is the message under which errors past MaxErrorKinds count.
const OtherErrors = "(other messages)"

// maxErrorText bounds one kept message and its example.
const maxErrorText = 300

// ErrorStat is one distinct failure of a window: its class, its message
// with ids and numbers masked (Message, what makes two failures the same),
// one real message (Example), how often and when first. Messages come
// from the client, which has removed credentials from them.
type ErrorStat struct {
	Class   client.Class
	Message string
	Example string
	Count   int64
	First   time.Time
}

// masked are the parts of a message that differ between otherwise equal
// failures: UUIDs, long hex ids, numbers.
var masked = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\b[0-9a-fA-F]{16,}\b|\d+(\.\d+)?`)

// NormalizeError masks ids and numbers in msg and bounds it to one line.
func NormalizeError(msg string) string {
	return oneLine(masked.ReplaceAllString(msg, "N"))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxErrorText {
		s = strings.ToValidUTF8(s[:maxErrorText], "") + "..."
	}
	return s
}

// errorText is what a failed result says: the server's message when it
// sent one, else the error.
func errorText(r *client.Result) string {
	if r.ServerMessage != "" {
		return r.ServerMessage
	}
	if r.Err != nil {
		return r.Err.Error()
	}
	return ""
}

type errorKey struct {
	class   client.Class
	message string
}

// addError counts one failure in w.Errors.
func (w *Window) addError(class client.Class, text string, at time.Time) {
	w.mergeError(ErrorStat{Class: class, Message: NormalizeError(text), Example: oneLine(text), Count: 1, First: at})
}

// mergeError adds e to w.Errors, folding it into OtherErrors when the
// window already keeps MaxErrorKinds others.
func (w *Window) mergeError(e ErrorStat) {
	if w.Errors == nil {
		w.Errors = make(map[errorKey]*ErrorStat)
	}
	k := errorKey{e.Class, e.Message}
	if _, ok := w.Errors[k]; !ok && len(w.Errors) >= MaxErrorKinds {
		k = errorKey{e.Class, OtherErrors}
		e.Message, e.Example = OtherErrors, ""
	}
	cur := w.Errors[k]
	if cur == nil {
		c := e
		w.Errors[k] = &c
		return
	}
	cur.Count += e.Count
	if !e.First.IsZero() && (cur.First.IsZero() || e.First.Before(cur.First)) {
		cur.First = e.First
		if e.Example != "" {
			cur.Example = e.Example
		}
	}
}

// TopErrors returns up to n of w's distinct failures, most frequent first
// (then earliest). n <= 0 returns them all.
func (w *Window) TopErrors(n int) []ErrorStat {
	out := make([]ErrorStat, 0, len(w.Errors))
	for _, e := range w.Errors {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b ErrorStat) int {
		switch {
		case a.Count != b.Count:
			if a.Count > b.Count {
				return -1
			}
			return 1
		case !a.First.Equal(b.First):
			return a.First.Compare(b.First)
		default:
			return strings.Compare(string(a.Class)+a.Message, string(b.Class)+b.Message)
		}
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// AddErrors merges the failures of es into w (a report from an agent).
func (w *Window) AddErrors(es []ErrorStat) {
	for _, e := range es {
		w.mergeError(e)
	}
}
