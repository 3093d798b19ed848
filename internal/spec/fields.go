package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// decoder walks the AST of one space file and records every problem.
type decoder struct {
	collector
}

// field is one value in a space file.
type field struct {
	name  string   // its key
	label string   // how messages name it: "max_trials", "objective.goal", `parameter "lr": min`
	key   pos      // where its key is; for a list item, where the list is
	node  ast.Node // its value
}

// pos is where the value is; a key written without a value is reported at
// the key.
func (f field) pos() pos {
	if isImplicitNull(f.node) {
		return f.key
	}
	return nodePos(f.node)
}

// object is a mapping with fixed keys, like objective or a parameter.
type object struct {
	what   string // how messages name it: "objective", `parameter "lr"`
	prefix string // the labels of its fields start with this
	pos    pos
	fields []field // in file order, duplicates left out
}

func (o *object) get(name string) (field, bool) {
	for _, f := range o.fields {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

// object decodes a mapping, reporting keys that are not names and
// duplicate keys.
func (d *decoder) object(f field, what, prefix string) (*object, bool) {
	v, ok := d.value(f)
	if !ok {
		return nil, false
	}
	m, ok := v.(*ast.MappingNode)
	if !ok {
		d.errorf(f.pos(), "%s must be a mapping, got %s", f.label, describe(v))
		return nil, false
	}
	o := &object{what: what, prefix: prefix, pos: nodePos(m)}
	first := map[string]pos{}
	for _, mv := range m.Values {
		kp := nodePos(mv.Key)
		name, problem := keyName(mv.Key)
		if problem != "" {
			d.errorf(kp, "%s: %s", what, problem)
			continue
		}
		if p, dup := first[name]; dup {
			d.errorf(kp, "duplicate key %q in %s (first at line %d); remove one of them", name, what, p.line)
			continue
		}
		first[name] = kp
		o.fields = append(o.fields, field{name: name, label: prefix + name, key: kp, node: mv.Value})
	}
	return o, true
}

// checkKeys reports every key of o that is not allowed.
func (d *decoder) checkKeys(o *object, allowed []string) {
	for _, f := range o.fields {
		if !slices.Contains(allowed, f.name) {
			d.unknownKey(o, f, allowed)
		}
	}
}

func (d *decoder) unknownKey(o *object, f field, allowed []string) {
	d.errorf(f.key, "unknown key %q in %s%s; allowed: %s", f.name, o.what, didYouMean(f.name, allowed), strings.Join(allowed, ", "))
}

// require returns the field name of o, reporting it missing at o with a
// hint saying what to add, unless o has a misspelling of it, which is
// reported as an unknown key.
func (d *decoder) require(o *object, name, hint string) (field, bool) {
	f, ok := o.get(name)
	if !ok && !slices.ContainsFunc(o.fields, func(f field) bool { return nearest(f.name, []string{name}) != "" }) {
		d.errorf(o.pos, "%s is missing required key %q; %s", o.what, name, hint)
	}
	return f, ok
}

// value returns f's Go value, reporting YAML features space files do not
// support.
func (d *decoder) value(f field) (any, bool) {
	v, problem := value(f.node)
	if problem != "" {
		d.errorf(f.pos(), "%s: %s", f.label, problem)
		return nil, false
	}
	return v, true
}

func (d *decoder) mismatch(f field, want string, got any) {
	hint := ""
	switch got.(type) {
	case int64, float64, bool:
		if want == "a string" {
			hint = "; quote it"
		}
	}
	d.errorf(f.pos(), "%s must be %s, got %s%s", f.label, want, describe(got), hint)
}

func (d *decoder) str(f field) (string, bool) {
	v, ok := d.value(f)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		d.mismatch(f, "a string", v)
	}
	return s, ok
}

// name is a non-empty string.
func (d *decoder) name(f field) (string, bool) {
	s, ok := d.str(f)
	if ok && s == "" {
		d.errorf(f.pos(), "%s must not be empty", f.label)
		return "", false
	}
	return s, ok
}

func (d *decoder) integer(f field) (int64, bool) {
	v, ok := d.value(f)
	if !ok {
		return 0, false
	}
	i, ok := v.(int64)
	if !ok {
		d.mismatch(f, "an integer", v)
	}
	return i, ok
}

// intIn is an integer in [lo, hi].
func (d *decoder) intIn(f field, lo, hi int64) (int, bool) {
	i, ok := d.integer(f)
	if !ok {
		return 0, false
	}
	if i < lo || i > hi {
		d.errorf(f.pos(), "%s must be %s, got %d", f.label, describeRange(lo, hi), i)
		return 0, false
	}
	return int(i), true
}

func describeRange(lo, hi int64) string {
	if hi == maxInt {
		return fmt.Sprintf("at least %d", lo)
	}
	return fmt.Sprintf("between %d and %d", lo, hi)
}

// number is a finite int or float.
func (d *decoder) number(f field) (float64, bool) {
	v, ok := d.value(f)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		if math.IsInf(n, 0) || math.IsNaN(n) {
			d.errorf(f.pos(), "%s must be a finite number, got %s", f.label, describe(n))
			return 0, false
		}
		return n, true
	}
	d.mismatch(f, "a number", v)
	return 0, false
}

// nonNegative is a finite number >= 0.
func (d *decoder) nonNegative(f field) (float64, bool) {
	n, ok := d.number(f)
	if ok && n < 0 {
		d.errorf(f.pos(), "%s must not be negative, got %s", f.label, num(n))
		return 0, false
	}
	return n, ok
}

func (d *decoder) boolean(f field) (bool, bool) {
	v, ok := d.value(f)
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		d.mismatch(f, "true or false", v)
	}
	return b, ok
}

// scalar is a string, int64, finite float64 or bool.
func (d *decoder) scalar(f field) (any, bool) {
	v, ok := d.value(f)
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case string, int64, bool:
		return x, true
	case float64:
		if !math.IsInf(x, 0) && !math.IsNaN(x) {
			return x, true
		}
	}
	d.mismatch(f, "a string, number or boolean", v)
	return nil, false
}

// list returns the items of a list, labelled label[i].
func (d *decoder) list(f field) ([]field, bool) {
	v, ok := d.value(f)
	if !ok {
		return nil, false
	}
	seq, ok := v.(*ast.SequenceNode)
	if !ok {
		d.mismatch(f, "a list", v)
		return nil, false
	}
	items := make([]field, len(seq.Values))
	for i, n := range seq.Values {
		label := fmt.Sprintf("%s[%d]", f.label, i)
		items[i] = field{name: f.name, label: label, key: f.pos(), node: n}
	}
	return items, true
}

// nonEmptyList is a list with at least one item.
func (d *decoder) nonEmptyList(f field, hint string) ([]field, bool) {
	items, ok := d.list(f)
	if ok && len(items) == 0 {
		d.errorf(f.pos(), "%s must not be empty; %s", f.label, hint)
		return nil, false
	}
	return items, ok
}

// enum is a string from allowed.
func (d *decoder) enum(f field, allowed ...string) (string, bool) {
	s, ok := d.str(f)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		d.errorf(f.pos(), "%s must be %s, got %q%s", f.label, orList(allowed), s, didYouMean(s, allowed))
		return "", false
	}
	return s, true
}

// duration is a Go duration string like 1h30m, or the integer 0.
func (d *decoder) duration(f field) (time.Duration, bool) {
	v, ok := d.value(f)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case int64:
		if x == 0 {
			return 0, true
		}
	case string:
		t, err := time.ParseDuration(x)
		if err != nil {
			d.errorf(f.pos(), "%s: %q is not a duration; write a number with a unit, like 90s, 30m or 1h30m", f.label, x)
			return 0, false
		}
		return t, true
	}
	d.mismatch(f, "a duration with a unit, like 90s, 30m or 1h30m", v)
	return 0, false
}

// orList writes "a, b or c".
func orList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
