package spec

import (
	"fmt"
	"slices"
	"strings"
)

// condChecker checks what parameters' when conditions refer to.
type condChecker struct {
	*decoder
	params []Param
	srcs   []paramSrc
	index  map[string]int
	cycles map[string]bool // cycles reported, by their sorted parameter names
}

// checkConditions reports conditions on unknown, float or later-declared
// parameters, cycles, and values the other parameter cannot take.
// Samplers choose parameters in declaration order, so a condition may only
// refer to a parameter declared before it.
func (d *decoder) checkConditions(params []Param, srcs []paramSrc) {
	c := &condChecker{decoder: d, params: params, srcs: srcs, index: map[string]int{}, cycles: map[string]bool{}}
	for i, p := range params {
		c.index[p.Name] = i
	}
	for i, p := range params {
		for j := range p.When {
			c.check(i, j)
		}
	}
}

func (c *condChecker) check(i, j int) {
	p, cond, src := &c.params[i], &c.params[i].When[j], c.srcs[i].when[j]
	t, found := c.index[cond.Param]
	switch {
	case !found:
		c.errorf(src.pos, "parameter %q: when names unknown parameter %q%s; declared parameters: %s",
			p.Name, cond.Param, didYouMean(cond.Param, c.names()), strings.Join(c.names(), ", "))
	case t == i:
		c.errorf(src.pos, "parameter %q: when cannot refer to the parameter itself", p.Name)
	case c.params[t].Type == Float:
		c.errorf(src.pos, "parameter %q: when cannot depend on float parameter %q; conditions need a categorical, int or constant parameter", p.Name, cond.Param)
	case t > i:
		c.checkOrder(i, t, src.pos)
	case c.srcs[t].ok:
		c.checkValues(p, cond, src, &c.params[t])
	}
}

// checkOrder reports a condition of parameter i on a later parameter t: a
// cycle if t depends on i, otherwise a declaration order problem.
func (c *condChecker) checkOrder(i, t int, at pos) {
	p, target := c.params[i].Name, c.params[t].Name
	path := c.path(t, i)
	if path == nil {
		c.errorf(at, "parameter %q depends on %q, which is declared after it; declare %q first (samplers choose parameters in declaration order)", p, target, target)
		return
	}
	names := slices.Clone(path)
	slices.Sort(names)
	key := strings.Join(names, "\x00")
	if c.cycles[key] {
		return
	}
	c.cycles[key] = true
	c.errorf(at, "conditions form a cycle: %s → %s; remove one of these conditions", p, strings.Join(path, " → "))
}

// path returns the names of parameters on a chain of conditions from
// parameter from to parameter to, or nil if there is none.
func (c *condChecker) path(from, to int) []string {
	seen := make([]bool, len(c.params))
	var walk func(i int) []string
	walk = func(i int) []string {
		if i == to {
			return []string{c.params[i].Name}
		}
		if seen[i] {
			return nil
		}
		seen[i] = true
		for _, cond := range c.params[i].When {
			if next, ok := c.index[cond.Param]; ok {
				if rest := walk(next); rest != nil {
					return append([]string{c.params[i].Name}, rest...)
				}
			}
		}
		return nil
	}
	return walk(from)
}

// checkValues reports condition values that target can never take.
func (c *condChecker) checkValues(p *Param, cond *Condition, src condSrc, target *Param) {
	for k, v := range cond.Values {
		if !target.canTake(v) {
			c.errorf(src.values[k], "parameter %q: when %s: %s is not a value of parameter %q, which takes %s",
				p.Name, cond.Param, show(v), target.Name, target.describeValues())
		}
	}
}

func (c *condChecker) names() []string {
	names := make([]string, len(c.params))
	for i, p := range c.params {
		names[i] = p.Name
	}
	return names
}

// canTake reports whether v is one of the values of a categorical, int or
// constant parameter.
func (p *Param) canTake(v any) bool {
	switch p.Type {
	case Categorical:
		return slices.ContainsFunc(p.Values, func(x any) bool { return SameValue(x, v) })
	case Constant:
		return SameValue(p.Value, v)
	case Int:
		f, ok := asFloat(v)
		if !ok || f < p.Min || f > p.Max || f != float64(int64(f)) {
			return false
		}
		return (int64(f)-int64(p.Min))%p.step() == 0
	}
	return false
}

// describeValues says in a message which values canTake accepts.
func (p *Param) describeValues() string {
	switch p.Type {
	case Categorical:
		shown := make([]string, len(p.Values))
		for i, v := range p.Values {
			shown[i] = show(v)
		}
		return strings.Join(shown, ", ")
	case Constant:
		return "only " + show(p.Value)
	}
	return fmt.Sprintf("whole numbers from %s to %s in steps of %d", num(p.Min), num(p.Max), p.step())
}
