package kubeswitch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// fieldPath is a path into an object, written
// "spec.template.spec.containers[name=router].env[name=MODE].value": map
// keys separated by dots, and after a key either [N], the Nth element of a
// list, or [FIELD=VALUE], the element whose FIELD is VALUE. It finds list
// elements by name, not by position, as kubectl's JSONPath filters do.
type fieldPath []pathStep

type pathStep struct {
	key string
	// index >= 0 selects a list element by position; else field and
	// value, when field is set, select it by content.
	index        int
	field, value string
}

func (s pathStep) String() string {
	switch {
	case s.index >= 0:
		return fmt.Sprintf("%s[%d]", s.key, s.index)
	case s.field != "":
		return fmt.Sprintf("%s[%s=%s]", s.key, s.field, s.value)
	}
	return s.key
}

// parsePath parses a field path; a leading dot is allowed.
func parsePath(s string) (fieldPath, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), ".")
	if s == "" {
		return nil, errors.New("empty field path")
	}
	var p fieldPath
	for s != "" {
		end := strings.IndexAny(s, ".[")
		if end < 0 {
			end = len(s)
		}
		st := pathStep{key: s[:end], index: -1}
		if st.key == "" {
			return nil, fmt.Errorf("field path: empty key before %q", s)
		}
		s = s[end:]
		if strings.HasPrefix(s, "[") {
			closeAt := strings.IndexByte(s, ']')
			if closeAt < 0 {
				return nil, fmt.Errorf("field path: unclosed [ in %q", s)
			}
			sel := s[1:closeAt]
			s = s[closeAt+1:]
			if f, v, ok := strings.Cut(sel, "="); ok {
				if f = strings.TrimSpace(f); f == "" {
					return nil, fmt.Errorf("field path: empty field in [%s]", sel)
				}
				st.field, st.value = f, strings.TrimSpace(v)
			} else {
				n, err := strconv.Atoi(strings.TrimSpace(sel))
				if err != nil || n < 0 {
					return nil, fmt.Errorf("field path: [%s] is neither an index nor FIELD=VALUE", sel)
				}
				st.index = n
			}
		}
		p = append(p, st)
		if s == "" {
			break
		}
		if s[0] != '.' {
			return nil, fmt.Errorf("field path: want . before %q", s)
		}
		s = s[1:]
		if s == "" {
			return nil, errors.New("field path ends with a dot")
		}
	}
	return p, nil
}

func (p fieldPath) String() string {
	parts := make([]string, len(p))
	for i, st := range p {
		parts[i] = st.String()
	}
	return strings.Join(parts, ".")
}

// lookup returns the value at p in obj (a decoded JSON object) and whether
// it is there.
func (p fieldPath) lookup(obj map[string]any) (any, bool) {
	var cur any = obj
	for _, st := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[st.key]; !ok {
			return nil, false
		}
		if st.index < 0 && st.field == "" {
			continue
		}
		list, ok := cur.([]any)
		if !ok {
			return nil, false
		}
		if st.index >= 0 {
			if st.index >= len(list) {
				return nil, false
			}
			cur = list[st.index]
			continue
		}
		found := false
		for _, e := range list {
			if em, ok := e.(map[string]any); ok && fmt.Sprint(em[st.field]) == st.value {
				cur, found = e, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return cur, true
}

// lookupString returns the value at p as a string; numbers and booleans
// are formatted.
func (p fieldPath) lookupString(obj map[string]any) (string, error) {
	v, ok := p.lookup(obj)
	if !ok || v == nil {
		return "", fmt.Errorf("field %s is not set", p)
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case bool, int64, float64, int:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("field %s is a %T, not a string", p, v)
}
