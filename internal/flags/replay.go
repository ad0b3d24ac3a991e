package flags

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// recorder wraps a flag's value and keeps every string the command line
// gave it, in order, so Replay can give them to another flag set.
type recorder struct {
	pflag.Value
	raw []string
}

func (r *recorder) Set(s string) error {
	if err := r.Value.Set(s); err != nil {
		return err
	}
	r.raw = append(r.raw, s)
	return nil
}

// Record makes fs keep what the user types for each of its flags; call it
// after every flag is registered and before parsing. Aliases share their
// flag's recorder.
func Record(fs *pflag.FlagSet) {
	seen := map[pflag.Value]*recorder{}
	fs.VisitAll(func(f *pflag.Flag) {
		if r, ok := f.Value.(*recorder); ok {
			seen[r] = r
			return
		}
		r := seen[f.Value]
		if r == nil {
			r = &recorder{Value: f.Value}
			seen[f.Value] = r
		}
		f.Value = r
	})
}

// Replay sets on to every flag the user gave on from (recorded with
// Record), value by value in the order typed: a file's settings bound to
// on are overridden by the command line, and settings the user did not
// type keep the file's values. Flags that on does not define are skipped;
// they belong to the command, not to the file. Every bad value is reported,
// joined.
func Replay(from, on *pflag.FlagSet) error {
	var errs []error
	done := map[*recorder]bool{}
	from.Visit(func(f *pflag.Flag) {
		r, ok := f.Value.(*recorder)
		dst := on.Lookup(f.Name)
		if !ok || done[r] || dst == nil {
			return
		}
		done[r] = true
		for _, v := range r.raw {
			// The value itself, not on.Set: a deprecated alias has
			// printed its notice once already.
			if err := dst.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("flag --%s: %w", f.Name, err))
				return
			}
		}
	})
	return errors.Join(errs...)
}
