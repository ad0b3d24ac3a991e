package sweep

import (
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Load reads the YAML file at path over Default(). A field the Spec does not
// have is an error that names it, so a misspelled key cannot be silently
// ignored. Load does not validate; call Validate after ApplyFlags.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load sweep spec: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("load sweep spec %s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a YAML (or JSON) document over Default(), rejecting unknown
// and duplicate fields.
func Parse(b []byte) (*Spec, error) {
	// Find unknown fields first, to name them with their path
	// ("modes[1].switch.uri"); UnmarshalStrict names only the key.
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(j, &doc); err == nil {
		if err := unknownFields(doc, reflect.TypeFor[Spec](), ""); err != nil {
			return nil, err
		}
	}
	s := Default()
	if err := yaml.UnmarshalStrict(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// unknownFields walks a decoded JSON document along the Go type it will be
// decoded into and reports the first object key that type does not have.
// Types that decode themselves (durations, think times) are not entered.
func unknownFields(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) ||
		reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a type error; UnmarshalStrict reports it
		}
		fields := map[string]reflect.Type{}
		var names []string
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f.Type
			names = append(names, name)
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			ft, ok := fields[k]
			if !ok {
				where := ""
				if path != "" {
					where = " in " + path
				}
				return fmt.Errorf("unknown field %q%s (known: %s)", k, where, strings.Join(names, ", "))
			}
			if err := unknownFields(obj[k], ft, joinPath(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, e := range arr {
			if err := unknownFields(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if err := unknownFields(obj[k], t.Elem(), joinPath(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// Marshal returns s as YAML, the form Load reads; an output directory keeps
// it so a sweep can be resumed with the same spec.
func (s *Spec) Marshal() ([]byte, error) { return yaml.Marshal(s) }
