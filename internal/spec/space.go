package spec

import (
	"fmt"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// MaxGridSize is the largest grid GridSize accepts.
const MaxGridSize = 1_000_000_000

// ParamByName returns the parameter called name.
func (s *Spec) ParamByName(name string) (*Param, bool) {
	for i := range s.Params {
		if s.Params[i].Name == name {
			return &s.Params[i], true
		}
	}
	return nil, false
}

// Active reports whether p is used given the values already chosen for
// the parameters before it: every condition's parameter must have one of
// the condition's values. Numbers compare by value whatever their type, so
// int64(3) equals float64(3).
func (p *Param) Active(params hptype.Params) bool {
	for _, c := range p.When {
		v, ok := params[c.Param]
		if !ok || !slices.ContainsFunc(c.Values, func(x any) bool { return SameValue(x, v) }) {
			return false
		}
	}
	return true
}

// GridValues returns the values the grid sampler tries for p: for an int
// parameter Min to Max by Step as int64, for a categorical one its Values,
// for a constant its Value, and for a float its Points as float64. ok is
// false for a float parameter without points. The values are built in
// memory, so check GridSize first.
func (p *Param) GridValues() (values []any, ok bool) {
	switch p.Type {
	case Int:
		for v := int64(p.Min); v <= int64(p.Max); v += p.step() {
			values = append(values, v)
		}
		return values, true
	case Categorical:
		return slices.Clone(p.Values), true
	case Constant:
		return []any{p.Value}, true
	case Float:
		for _, x := range p.Points {
			values = append(values, x)
		}
		return values, len(p.Points) > 0
	}
	return nil, false
}

// step is an int parameter's Step, 1 when unset.
func (p *Param) step() int64 {
	return max(p.Step, 1)
}

// gridCount is how many values GridValues returns, without building them.
func (p *Param) gridCount() int64 {
	switch p.Type {
	case Int:
		return max(0, (int64(p.Max)-int64(p.Min))/p.step()+1)
	case Categorical:
		return int64(len(p.Values))
	case Constant:
		return 1
	}
	return int64(len(p.Points))
}

// GridSize is the number of points of the full grid: the product of every
// parameter's GridValues count, conditional parameters included. It is an
// error if a float parameter has no points or the grid exceeds MaxGridSize.
func (s *Spec) GridSize() (int, error) {
	size := int64(1)
	for i := range s.Params {
		p := &s.Params[i]
		if p.Type == Float && len(p.Points) == 0 {
			return 0, fmt.Errorf("float parameter %s has no points, so it has no grid", p.Name)
		}
		n := p.gridCount()
		if n == 0 {
			return 0, nil
		}
		if n > MaxGridSize/size {
			return 0, fmt.Errorf("the grid has more than %d points", MaxGridSize)
		}
		size *= n
	}
	return int(size), nil
}

// SameValue compares parameter values: numbers by value whatever their
// type, strings and booleans as themselves.
func SameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64:
		if y, ok := b.(int64); ok {
			return x == y
		}
	}
	x, aNum := asFloat(a)
	y, bNum := asFloat(b)
	return aNum && bNum && x == y
}

// asFloat reads v as a number the way hptype.Params.Float does.
func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case string, bool:
		return 0, false
	}
	f, err := hptype.Params{"v": v}.Float("v")
	return f, err == nil
}
