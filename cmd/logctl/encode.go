package main

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The --output json and yaml forms of every command are built by toTree
// from one value, so both say the same thing in the same field order, and
// three rules hold everywhere (logctl --help and docs/guide.md's quick start
// state them):
//
//   - a time.Duration is an integer number of milliseconds, and its field
//     name ends in "_ms" (checked when the value is converted: a duration
//     under any other name is a bug of the printed type, not of the input);
//   - a list is [] when empty, never null;
//   - times are RFC 3339 strings, as encoding/json writes them.
//
// The client's types keep their json tags; toTree reads them the way
// encoding/json does for the cases logctl prints (names, omitempty,
// omitzero, "-", embedded structs, json.Marshaler leaves such as
// time.Time), but not its rules for fields of the same name at different
// depths: printed types have none. Encoded by encoding/json directly, the
// client's durations would be nanoseconds under their *_ms names, which is
// why every structured output goes through toTree.

// object is a JSON object whose fields keep their order.
type object []field

type field struct {
	name  string
	value any // nil, bool, json.Number, string, []any or object
}

// MarshalJSON writes o compactly in its order; json.Encoder indents it.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.name)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

// toTree converts v into nil, bool, json.Number, string, []any or object.
func toTree(v any) (any, error) {
	return treeOf(reflect.ValueOf(v), "")
}

// treeOf converts v; name is the JSON name of the field holding it, for
// the duration rule and for errors.
func treeOf(v reflect.Value, name string) (any, error) {
	if !v.IsValid() {
		return nil, nil
	}
	t := v.Type()
	if t == durationType {
		if name != "" && !strings.HasSuffix(name, "_ms") {
			return nil, fmt.Errorf("output field %q holds a duration: its name must end in _ms", name)
		}
		return json.Number(strconv.FormatInt(time.Duration(v.Int()).Milliseconds(), 10)), nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		if t.Kind() == reflect.Pointer && !t.Implements(marshalerType) {
			return treeOf(v.Elem(), name)
		}
	}
	if t.Implements(marshalerType) || t.Implements(textType) {
		// time.Time and the like: take their own JSON form.
		b, err := json.Marshal(v.Interface())
		if err != nil {
			return nil, fmt.Errorf("output field %q: %w", name, err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var out any
		if err := d.Decode(&out); err != nil {
			return nil, fmt.Errorf("output field %q: %w", name, err)
		}
		return normalize(out), nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return treeOf(v.Elem(), name)
	case reflect.Struct:
		o := object{}
		if err := appendFields(&o, v); err != nil {
			return nil, err
		}
		return o, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			if v.IsNil() {
				return nil, nil
			}
			return base64.StdEncoding.EncodeToString(v.Bytes()), nil
		}
		out := make([]any, 0, v.Len())
		for i := range v.Len() {
			e, err := treeOf(v.Index(i), name)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case reflect.Map:
		keys := v.MapKeys()
		o := make(object, 0, len(keys))
		for _, k := range keys {
			if k.Kind() != reflect.String {
				return nil, fmt.Errorf("output field %q: map key of type %s", name, k.Type())
			}
			e, err := treeOf(v.MapIndex(k), k.String())
			if err != nil {
				return nil, err
			}
			o = append(o, field{name: k.String(), value: e})
		}
		slices.SortFunc(o, func(a, b field) int { return strings.Compare(a.name, b.name) })
		return o, nil
	case reflect.String:
		return v.String(), nil
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Float32, reflect.Float64:
		b, err := json.Marshal(v.Interface())
		if err != nil {
			return nil, fmt.Errorf("output field %q: %w", name, err)
		}
		return json.Number(b), nil
	}
	return nil, fmt.Errorf("output field %q: cannot print a %s", name, t)
}

// appendFields appends the JSON fields of struct v to o, inlining
// embedded structs without a name as encoding/json does.
func appendFields(o *object, v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv, ft = fv.Elem(), ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if err := appendFields(o, fv); err != nil {
					return err
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if hasOpt(opts, "omitzero") && fv.IsZero() {
			continue
		}
		if hasOpt(opts, "omitempty") && isEmpty(fv) {
			continue
		}
		e, err := treeOf(fv, name)
		if err != nil {
			return err
		}
		*o = append(*o, field{name: name, value: e})
	}
	return nil
}

func hasOpt(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// normalize turns the maps of a decoded JSON value into sorted objects.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		o := make(object, 0, len(v))
		for k, e := range v {
			o = append(o, field{name: k, value: normalize(e)})
		}
		slices.SortFunc(o, func(a, b field) int { return strings.Compare(a.name, b.name) })
		return o
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
		return v
	}
	return v
}

// writeTree writes a tree as indented JSON (and a newline) or as a YAML
// document.
func writeTree(w io.Writer, output string, tree any) error {
	if output == outputYAML {
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(yamlNode(tree)); err != nil {
			return err
		}
		return enc.Close()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(tree)
}

// yaml11Bools are the plain words YAML 1.1 reads as booleans.
var yaml11Bools = map[string]bool{"y": true, "n": true, "yes": true, "no": true, "on": true, "off": true}

// yamlNode converts a tree to YAML nodes, keeping the order of objects;
// each scalar is tagged with its JSON type, so the encoder quotes a string
// that would read back as something else ("true", "n", "2026-01-02").
func yamlNode(v any) *yaml.Node {
	switch v := v.(type) {
	case object:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, f := range v {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.name}, yamlNode(f.value))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			n.Content = append(n.Content, yamlNode(e))
		}
		return n
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if yaml11Bools[strings.ToLower(v)] {
			// Plain in YAML 1.2, which the encoder writes, but a boolean
			// to YAML 1.1 readers (PyYAML, many tools): quoted for them.
			n.Style = yaml.DoubleQuotedStyle
		}
		return n
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}
