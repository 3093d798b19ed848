package search

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// maxGridStates bounds the bookkeeping of a grid with conditional
// parameters: the number of prefixes counted in grid.memo.
const maxGridStates = 100_000

// GridSize returns the number of points of the grid sampler's grid over the
// space of s: its distinct combinations of active parameters.
func GridSize(s *spec.Spec) (int, error) {
	sp, err := compile(s.Params)
	if err != nil {
		return 0, err
	}
	g, err := newGrid(sp)
	if err != nil {
		return 0, err
	}
	return g.size, nil
}

// grid is the grid sampler: it enumerates the Cartesian product of the
// parameters' discrete values (an int parameter's steps, a categorical
// parameter's values, a constant's value, a float parameter's points) in
// row-major order over the parameters in declaration order, the last
// parameter varying fastest, as nested for-loops in declaration order would;
// each parameter's values come in declaration order (an int's ascending).
// A parameter that is inactive given the values before it contributes one
// choice, absent, so no two points are the same trial. Trial n is point n;
// past the last point Sample returns ErrExhausted.
//
// Sample decodes n as a mixed-radix number without enumerating the points.
// With conditional parameters the number of completions of a prefix
// depends on the prefix; those numbers are counted once, when the sampler
// is made, and kept in memo.
type grid struct {
	space *space
	// counts[i] is the number of values of parameter i.
	counts []int
	// decisive[i] is whether a condition of a later parameter refers to
	// parameter i.
	decisive []bool
	// deps[i] are the indices of the parameters before i that a condition
	// of parameter i or of a later one refers to: the part of a prefix
	// that decides how it can be completed.
	deps [][]int
	// memo[i] maps a key of the choices of deps[i] (see key) to the number
	// of ways to complete a prefix of i parameters with those choices.
	memo []map[string]int
	size int
}

// errGridTooLarge is wrapped by the errors of grids whose size or
// bookkeeping exceeds what Sample can count.
var errGridTooLarge = errors.New("grid too large")

var errGridOverflow = fmt.Errorf("grid sampler: the grid has more than %d points: %w", math.MaxInt, errGridTooLarge)

func newGrid(sp *space) (*grid, error) {
	n := len(sp.params)
	g := &grid{
		space:    sp,
		counts:   make([]int, n),
		decisive: make([]bool, n),
		deps:     make([][]int, n),
		memo:     make([]map[string]int, n),
	}
	for i := range sp.params {
		p := &sp.params[i]
		switch p.Type {
		case spec.Float:
			if len(p.Points) == 0 {
				return nil, fmt.Errorf("grid sampler: float parameter %q has no points; list its grid points or use another sampler", p.Name)
			}
			g.counts[i] = len(p.Points)
		case spec.Int:
			g.counts[i] = int(p.count)
		case spec.Categorical:
			g.counts[i] = len(p.Values)
		case spec.Constant:
			g.counts[i] = 1
		}
	}
	for i := n - 1; i >= 0; i-- {
		for _, c := range sp.params[i].when {
			g.decisive[c.ref] = true
		}
		for j := range i {
			if g.decisive[j] {
				g.deps[i] = append(g.deps[i], j)
			}
		}
		g.memo[i] = make(map[string]int)
	}
	c := counter{grid: g, pre: newPrefix(n)}
	size, err := c.count(0)
	if err != nil {
		return nil, err
	}
	g.size = size
	return g, nil
}

// value returns value number v of parameter i.
func (g *grid) value(i, v int) any {
	p := &g.space.params[i]
	switch p.Type {
	case spec.Float:
		return p.Points[v]
	case spec.Int:
		return p.lo + int64(v)*p.step
	case spec.Categorical:
		return p.Values[v]
	}
	return p.Value
}

// prefix is a choice for each of the first parameters of the grid.
type prefix struct {
	// choice[i] is the index of parameter i's value, -1 when absent.
	choice []int
	// vals[i] is parameter i's value, nil when absent.
	vals []any
	// key is scratch space for grid.key.
	key []byte
}

func newPrefix(n int) *prefix {
	return &prefix{choice: make([]int, n), vals: make([]any, n)}
}

// set records value v of parameter i, or its absence when v is -1.
func (pre *prefix) set(g *grid, i, v int) {
	pre.choice[i] = v
	pre.vals[i] = nil
	if v >= 0 {
		pre.vals[i] = g.value(i, v)
	}
}

// key encodes the part of the prefix's first i choices that decides its
// completions: the choices of deps[i].
func (g *grid) key(i int, pre *prefix) []byte {
	pre.key = pre.key[:0]
	for _, j := range g.deps[i] {
		pre.key = binary.AppendVarint(pre.key, int64(pre.choice[j]))
	}
	return pre.key
}

// completions returns the number of ways to complete the prefix's first i
// choices, which count recorded.
func (g *grid) completions(i int, pre *prefix) int {
	if i == len(g.counts) {
		return 1
	}
	return g.memo[i][string(g.key(i, pre))]
}

// counter fills a grid's memo.
type counter struct {
	grid   *grid
	pre    *prefix
	states int
}

// count returns the number of ways to complete the first i choices of
// c.pre, recording it in the grid's memo.
func (c *counter) count(i int) (int, error) {
	g := c.grid
	if i == len(g.counts) {
		return 1, nil
	}
	key := string(g.key(i, c.pre))
	if n, ok := g.memo[i][key]; ok {
		return n, nil
	}
	if c.states++; c.states > maxGridStates {
		return 0, fmt.Errorf("grid sampler: conditional parameters make more than %d distinct prefixes to count; simplify the conditions or use another sampler: %w", maxGridStates, errGridTooLarge)
	}
	var total int
	switch {
	case !g.space.params[i].active(c.pre.vals):
		c.pre.set(g, i, -1)
		n, err := c.count(i + 1)
		if err != nil {
			return 0, err
		}
		total = n
	case !g.decisive[i]:
		// Every value of parameter i has the same completions.
		c.pre.set(g, i, 0)
		n, err := c.count(i + 1)
		if err != nil {
			return 0, err
		}
		if n > math.MaxInt/g.counts[i] {
			return 0, errGridOverflow
		}
		total = n * g.counts[i]
	default:
		for v := range g.counts[i] {
			c.pre.set(g, i, v)
			n, err := c.count(i + 1)
			if err != nil {
				return 0, err
			}
			if total > math.MaxInt-n {
				return 0, errGridOverflow
			}
			total += n
		}
	}
	g.memo[i][key] = total
	return total, nil
}

// Sample implements Sampler: it returns point n of the grid, or
// ErrExhausted when n is past the last point.
func (g *grid) Sample(ctx context.Context, n int, _ []hptype.Trial) (hptype.Params, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("trial number %d is negative", n)
	}
	if n >= g.size {
		return nil, fmt.Errorf("grid sampler: trial %d of a grid of %d points: %w", n, g.size, ErrExhausted)
	}
	params := g.space.params
	pre := newPrefix(len(params))
	out := make(hptype.Params, len(params))
	for i := range params {
		switch {
		case !params[i].active(pre.vals):
			pre.set(g, i, -1)
			continue
		case !g.decisive[i]:
			// The completions do not depend on parameter i's value.
			c := g.completions(i+1, pre)
			pre.set(g, i, n/c)
			n %= c
		default:
			for v := range g.counts[i] {
				pre.set(g, i, v)
				c := g.completions(i+1, pre)
				if n < c {
					break
				}
				n -= c
			}
		}
		out[params[i].Name] = pre.vals[i]
	}
	return out, nil
}
