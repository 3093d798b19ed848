package spec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

var paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

var paramTypes = []string{string(Float), string(Int), string(Categorical), string(Constant)}

// paramKeys are the keys each parameter type allows, in canonical order.
var paramKeys = map[ParamType][]string{
	Float:       {"type", "min", "max", "log", "points", "when"},
	Int:         {"type", "min", "max", "log", "step", "when"},
	Categorical: {"type", "values", "when"},
	Constant:    {"type", "value", "when"},
}

// anyParamKeys are the keys some parameter type allows.
var anyParamKeys = []string{"type", "min", "max", "log", "step", "points", "values", "value", "when"}

// maxExactInt bounds int parameters so that float64 holds them exactly.
const maxExactInt = 1 << 53

// paramSrc is where a parameter's parts are in the space file.
type paramSrc struct {
	pos  pos // the key naming the parameter
	ok   bool
	when []condSrc // one per Param.When
}

// condSrc is where a condition's parts are in the space file.
type condSrc struct {
	pos    pos   // the key naming the other parameter
	values []pos // one per Condition.Values
}

func (d *decoder) params(root *object) ([]Param, []paramSrc) {
	const example = "lr: {type: float, min: 0.001, max: 0.1}"
	f, ok := d.require(root, "parameters", "add parameters: with at least one parameter, e.g. "+example)
	if !ok {
		return nil, nil
	}
	o, ok := d.object(f, "parameters", "parameters.")
	if !ok {
		return nil, nil
	}
	if len(o.fields) == 0 {
		d.errorf(f.pos(), "parameters must declare at least one parameter, e.g. %s", example)
	}
	params := make([]Param, len(o.fields))
	srcs := make([]paramSrc, len(o.fields))
	for i, pf := range o.fields {
		params[i], srcs[i] = d.param(pf)
	}
	return params, srcs
}

// param decodes one parameter; its paramSrc is ok when nothing was wrong.
func (d *decoder) param(pf field) (Param, paramSrc) {
	p := Param{Name: pf.name}
	src := paramSrc{pos: pf.key}
	before := len(d.errs)
	if !paramName.MatchString(pf.name) {
		d.errorf(pf.key, "parameter name %q is invalid; use up to 64 letters, digits and '_', not starting with a digit", pf.name)
	}
	what := fmt.Sprintf("parameter %q", pf.name)
	if o, ok := d.object(pf, what, what+": "); ok {
		d.paramBody(o, &p, &src)
	}
	src.ok = len(d.errs) == before
	return p, src
}

func (d *decoder) paramBody(o *object, p *Param, src *paramSrc) {
	typ := d.paramType(o)
	if typ == "" {
		d.checkKeys(o, anyParamKeys)
		return
	}
	p.Type = typ
	d.checkParamKeys(o, typ)
	switch typ {
	case Float:
		d.floatParam(o, p)
	case Int:
		d.intParam(o, p)
	case Categorical:
		p.Values = d.categories(o)
	case Constant:
		if f, ok := d.require(o, "value", "add value: with a string, number or boolean"); ok {
			p.Value, _ = d.scalar(f)
		}
	}
	if f, ok := o.get("when"); ok {
		p.When, src.when = d.when(f, o)
	}
}

func (d *decoder) paramType(o *object) ParamType {
	f, ok := d.require(o, "type", "add type: "+orList(paramTypes))
	if !ok {
		return ""
	}
	typ, _ := d.enum(f, paramTypes...)
	return ParamType(typ)
}

// checkParamKeys reports the keys that a parameter of type typ does not
// allow, telling keys of other types from unknown ones.
func (d *decoder) checkParamKeys(o *object, typ ParamType) {
	allowed := paramKeys[typ]
	for _, f := range o.fields {
		switch {
		case slices.Contains(allowed, f.name):
		case slices.Contains(anyParamKeys, f.name):
			hint := ""
			if typ == Float && f.name == "step" {
				hint = " (to search a float on a grid, list its values in points)"
			}
			d.errorf(f.key, "key %q does not apply to a %s parameter%s; allowed in %s: %s", f.name, typ, hint, o.what, strings.Join(allowed, ", "))
		default:
			d.unknownKey(o, f, allowed)
		}
	}
}

func (d *decoder) floatParam(o *object, p *Param) {
	minF, okMin := d.require(o, "min", "add min: with the smallest value")
	maxF, okMax := d.require(o, "max", "add max: with the largest value")
	if okMin {
		p.Min, okMin = d.number(minF)
	}
	if okMax {
		p.Max, okMax = d.number(maxF)
	}
	bounded := okMin && okMax
	if bounded && p.Min >= p.Max {
		d.errorf(minF.pos(), "%smin must be less than max, got min %s and max %s", o.prefix, formatFloat(p.Min), formatFloat(p.Max))
		bounded = false
	}
	p.Log = d.logScale(o, p.Min, okMin)
	if f, ok := o.get("points"); ok {
		p.Points = d.points(f, p, bounded)
	}
}

func (d *decoder) intParam(o *object, p *Param) {
	minF, okMin := d.require(o, "min", "add min: with the smallest value")
	maxF, okMax := d.require(o, "max", "add max: with the largest value")
	if okMin {
		p.Min, okMin = d.whole(minF)
	}
	if okMax {
		p.Max, okMax = d.whole(maxF)
	}
	if okMin && okMax && p.Min > p.Max {
		d.errorf(minF.pos(), "%smin must not be greater than max, got min %s and max %s", o.prefix, num(p.Min), num(p.Max))
	}
	p.Log = d.logScale(o, p.Min, okMin)
	p.Step = 1
	if f, ok := o.get("step"); ok {
		p.Step = d.step(f, p.Log)
	}
}

// whole is a whole number that float64 holds exactly.
func (d *decoder) whole(f field) (float64, bool) {
	n, ok := d.number(f)
	if !ok {
		return 0, false
	}
	if n != math.Trunc(n) || math.Abs(n) > maxExactInt {
		d.errorf(f.pos(), "%s must be a whole number between -2^53 and 2^53, got %s", f.label, num(n))
		return 0, false
	}
	return float64(int64(n)), true
}

func (d *decoder) step(f field, log bool) int64 {
	step, ok := d.integer(f)
	switch {
	case !ok:
	case step < 1:
		d.errorf(f.pos(), "%s must be at least 1, got %d", f.label, step)
	case log && step > 1:
		d.errorf(f.pos(), "%s above 1 cannot be combined with log: true; remove one of them", f.label)
	}
	return step
}

// logScale decodes log, which needs a positive min.
func (d *decoder) logScale(o *object, minVal float64, knownMin bool) bool {
	f, ok := o.get("log")
	if !ok {
		return false
	}
	log, ok := d.boolean(f)
	if ok && log && knownMin && minVal <= 0 {
		d.errorf(f.pos(), "%s: true needs min > 0, got min %s; raise min or remove log", f.label, num(minVal))
	}
	return log
}

// points decodes a float parameter's grid points; bounded says p.Min and
// p.Max are valid, so points can be checked against them.
func (d *decoder) points(f field, p *Param, bounded bool) []float64 {
	items, ok := d.nonEmptyList(f, "list the values to try, e.g. [0.1, 0.5], or remove points")
	if !ok {
		return nil
	}
	points := make([]float64, len(items))
	for i, it := range items {
		x, ok := d.number(it)
		points[i] = x
		switch {
		case !ok:
		case bounded && (x < p.Min || x > p.Max):
			d.errorf(it.pos(), "%s (%s) is outside [min, max] = [%s, %s]", it.label, num(x), num(p.Min), num(p.Max))
		case slices.Contains(points[:i], x):
			d.errorf(it.pos(), "%s: duplicate point %s; remove it", it.label, num(x))
		}
	}
	return points
}

// categories decodes a categorical parameter's values.
func (d *decoder) categories(o *object) []any {
	f, ok := d.require(o, "values", "add values: with the choices, e.g. [sgd, adam]")
	if !ok {
		return nil
	}
	items, ok := d.nonEmptyList(f, "list the choices, e.g. [sgd, adam]")
	if !ok {
		return nil
	}
	values := make([]any, 0, len(items))
	for _, it := range items {
		v, ok := d.scalar(it)
		if !ok {
			continue
		}
		if slices.ContainsFunc(values, func(x any) bool { return SameValue(x, v) }) {
			d.errorf(it.pos(), "%s: duplicate value %s; remove it", it.label, show(v))
		}
		values = append(values, v)
	}
	return values
}

// when decodes a parameter's conditions; what they refer to is checked
// once every parameter is decoded.
func (d *decoder) when(f field, param *object) ([]Condition, []condSrc) {
	o, ok := d.object(f, "when of "+param.what, param.prefix+"when.")
	if !ok {
		return nil, nil
	}
	if len(o.fields) == 0 {
		d.errorf(f.pos(), "%s must name at least one parameter, e.g. when: {optimizer: [momentum]}; or remove it", f.label)
	}
	var conds []Condition
	var srcs []condSrc
	for _, cf := range o.fields {
		items, ok := d.nonEmptyList(cf, fmt.Sprintf("list the values of %s for which this parameter is used", cf.name))
		if !ok {
			continue
		}
		c := Condition{Param: cf.name}
		src := condSrc{pos: cf.key}
		for _, it := range items {
			if v, ok := d.scalar(it); ok {
				c.Values = append(c.Values, v)
				src.values = append(src.values, it.pos())
			}
		}
		conds = append(conds, c)
		srcs = append(srcs, src)
	}
	return conds, srcs
}
