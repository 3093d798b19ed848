package search

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

func TestGridOrder(t *testing.T) {
	sgd := []spec.Condition{{Param: "opt", Values: []any{"sgd"}}}
	tests := []struct {
		name   string
		params []spec.Param
		want   []hptype.Params
	}{
		{
			name: "2x3, last varies fastest",
			params: []spec.Param{
				{Name: "a", Type: spec.Int, Min: 1, Max: 2},
				{Name: "b", Type: spec.Categorical, Values: []any{"x", "y", "z"}},
			},
			want: []hptype.Params{
				{"a": int64(1), "b": "x"}, {"a": int64(1), "b": "y"}, {"a": int64(1), "b": "z"},
				{"a": int64(2), "b": "x"}, {"a": int64(2), "b": "y"}, {"a": int64(2), "b": "z"},
			},
		},
		{
			name: "constant, float points, int steps",
			params: []spec.Param{
				{Name: "lr", Type: spec.Float, Min: 1e-3, Max: 1e-1, Log: true, Points: []float64{0.1, 0.01}},
				{Name: "epochs", Type: spec.Constant, Value: int64(5)},
				{Name: "units", Type: spec.Int, Min: 16, Max: 60, Step: 16},
			},
			want: []hptype.Params{
				{"lr": 0.1, "epochs": int64(5), "units": int64(16)},
				{"lr": 0.1, "epochs": int64(5), "units": int64(32)},
				{"lr": 0.1, "epochs": int64(5), "units": int64(48)},
				{"lr": 0.01, "epochs": int64(5), "units": int64(16)},
				{"lr": 0.01, "epochs": int64(5), "units": int64(32)},
				{"lr": 0.01, "epochs": int64(5), "units": int64(48)},
			},
		},
		{
			name: "conditional",
			params: []spec.Param{
				{Name: "opt", Type: spec.Categorical, Values: []any{"adam", "sgd"}},
				{Name: "momentum", Type: spec.Float, Points: []float64{0.9, 0.99}, When: sgd},
				{Name: "layers", Type: spec.Int, Min: 1, Max: 2},
			},
			want: []hptype.Params{
				{"opt": "adam", "layers": int64(1)},
				{"opt": "adam", "layers": int64(2)},
				{"opt": "sgd", "momentum": 0.9, "layers": int64(1)},
				{"opt": "sgd", "momentum": 0.9, "layers": int64(2)},
				{"opt": "sgd", "momentum": 0.99, "layers": int64(1)},
				{"opt": "sgd", "momentum": 0.99, "layers": int64(2)},
			},
		},
		{
			name: "conditional on a later-varying prefix",
			params: []spec.Param{
				{Name: "layers", Type: spec.Int, Min: 1, Max: 2},
				{Name: "opt", Type: spec.Categorical, Values: []any{"sgd", "adam"}},
				{Name: "momentum", Type: spec.Float, Points: []float64{0.9, 0.99}, When: sgd},
			},
			want: []hptype.Params{
				{"layers": int64(1), "opt": "sgd", "momentum": 0.9},
				{"layers": int64(1), "opt": "sgd", "momentum": 0.99},
				{"layers": int64(1), "opt": "adam"},
				{"layers": int64(2), "opt": "sgd", "momentum": 0.9},
				{"layers": int64(2), "opt": "sgd", "momentum": 0.99},
				{"layers": int64(2), "opt": "adam"},
			},
		},
		{
			name:   "empty space has one empty point",
			params: nil,
			want:   []hptype.Params{{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSampler(t, spec.Grid, 0, tt.params)
			size, err := GridSize(&spec.Spec{Params: tt.params})
			if err != nil || size != len(tt.want) {
				t.Fatalf("GridSize = %d, %v; want %d", size, err, len(tt.want))
			}
			got := sampleAll(t, s, len(tt.want))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("points:\n got %v\nwant %v", got, tt.want)
			}
			_, err = s.Sample(t.Context(), len(tt.want), nil)
			if !errors.Is(err, ErrExhausted) {
				t.Errorf("Sample(%d) past the end: err = %v, want ErrExhausted", len(tt.want), err)
			}
		})
	}
}

func TestGridConditional(t *testing.T) {
	// adam: mode; layers 1, 2, or 3 with units3 32, or 64 with dropout3
	// 0.1 or 0.2: 5 points. sgd: momentum 0.9 or 0.99; layers 1, 2, or 3
	// with units3 32 or 64 (dropout3 needs mode): 2 * 4 points.
	const want = 5 + 2*4
	size, err := GridSize(&spec.Spec{Params: conditionalSpace()})
	if err != nil || size != want {
		t.Fatalf("GridSize = %d, %v; want %d", size, err, want)
	}
	s := newSampler(t, spec.Grid, 0, conditionalSpace())
	seen := map[string]int{}
	for n, p := range sampleAll(t, s, want) {
		checkConditional(t, n, p)
		key := fmt.Sprint(p) // fmt prints maps with sorted keys
		if m, dup := seen[key]; dup {
			t.Errorf("trials %d and %d are both %s", m, n, key)
		}
		seen[key] = n
	}
	if _, err := s.Sample(t.Context(), want, nil); !errors.Is(err, ErrExhausted) {
		t.Errorf("Sample(%d): err = %v, want ErrExhausted", want, err)
	}
}

func TestGridLarge(t *testing.T) {
	// 2^40 points, sampled without enumerating them.
	params := []spec.Param{
		{Name: "a", Type: spec.Int, Min: 0, Max: 1<<20 - 1},
		{Name: "b", Type: spec.Int, Min: 0, Max: 1<<20 - 1},
	}
	size, err := GridSize(&spec.Spec{Params: params})
	if err != nil || size != 1<<40 {
		t.Fatalf("GridSize = %d, %v; want 2^40", size, err)
	}
	p, err := newSampler(t, spec.Grid, 0, params).Sample(t.Context(), 3<<20+5, nil)
	if want := (hptype.Params{"a": int64(3), "b": int64(5)}); err != nil || !reflect.DeepEqual(p, want) {
		t.Errorf("Sample(3<<20+5) = %v, %v; want %v", p, err, want)
	}
}

func TestGridTooManyPrefixes(t *testing.T) {
	// A condition on k two-valued parameters makes 2^k distinct prefixes
	// to count.
	var params []spec.Param
	var when []spec.Condition
	for i := range bits.Len(maxGridStates) {
		name := fmt.Sprintf("p%d", i)
		params = append(params, spec.Param{Name: name, Type: spec.Categorical, Values: []any{"a", "b"}})
		when = append(when, spec.Condition{Param: name, Values: []any{"a", "b"}})
	}
	params = append(params, spec.Param{Name: "q", Type: spec.Constant, Value: true, When: when})
	_, err := GridSize(&spec.Spec{Params: params})
	if !errors.Is(err, errGridTooLarge) {
		t.Fatalf("GridSize: err = %v, want errGridTooLarge", err)
	}
}

func TestGridSizeErrors(t *testing.T) {
	_, err := GridSize(&spec.Spec{Params: []spec.Param{{Name: "lr", Type: spec.Float, Min: 0, Max: 1}}})
	if err == nil {
		t.Error("GridSize of a float without points: no error")
	}
	_, err = GridSize(&spec.Spec{Params: []spec.Param{{Name: "a", Type: spec.Categorical}}})
	if err == nil {
		t.Error("GridSize of a categorical without values: no error")
	}
}

// TestGridMatchesNestedLoops compares the grid with nested for-loops over
// random conditional spaces.
func TestGridMatchesNestedLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for space := range 300 {
		params := randomSpace(r)
		want := nestedLoops(params)
		size, err := GridSize(&spec.Spec{Params: params})
		if err != nil || size != len(want) {
			t.Fatalf("space %d %+v: GridSize = %d, %v; want %d", space, params, size, err, len(want))
		}
		got := sampleAll(t, newSampler(t, spec.Grid, 0, params), size)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("space %d %+v:\n got %v\nwant %v", space, params, got, want)
		}
	}
}

// randomSpace returns 1 to 6 parameters with small domains, some with
// conditions on earlier discrete parameters.
func randomSpace(r *rand.Rand) []spec.Param {
	params := make([]spec.Param, 1+r.IntN(6))
	for i := range params {
		p := spec.Param{Name: fmt.Sprintf("p%d", i)}
		switch r.IntN(4) {
		case 0:
			p.Type, p.Min, p.Max, p.Step = spec.Int, float64(r.IntN(3)), float64(3+r.IntN(3)), int64(1+r.IntN(2))
		case 1:
			p.Type, p.Values = spec.Categorical, []any{"a", int64(1), "c"}[:1+r.IntN(3)]
		case 2:
			p.Type, p.Value = spec.Constant, int64(r.IntN(4))
		case 3:
			p.Type, p.Points = spec.Float, []float64{0.5, 1.5, 2.5}[:1+r.IntN(3)]
		}
		for j := range i {
			q := params[j]
			if q.Type == spec.Float || r.IntN(3) > 0 {
				continue
			}
			// Numbers as float64, to compare across kinds.
			values := []any{"a", "c", 1.0, 2.0, 3.0, 4.0}
			r.Shuffle(len(values), func(a, b int) { values[a], values[b] = values[b], values[a] })
			p.When = append(p.When, spec.Condition{Param: q.Name, Values: values[:1+r.IntN(3)]})
		}
		params[i] = p
	}
	return params
}

// nestedLoops enumerates the grid of params the obvious way.
func nestedLoops(params []spec.Param) []hptype.Params {
	var out []hptype.Params
	var loop func(i int, cur hptype.Params)
	loop = func(i int, cur hptype.Params) {
		if i == len(params) {
			out = append(out, maps.Clone(cur))
			return
		}
		p := params[i]
		for _, c := range p.When {
			if v, ok := cur[c.Param]; !ok || !slices.ContainsFunc(c.Values, func(w any) bool { return spec.SameValue(v, w) }) {
				loop(i+1, cur)
				return
			}
		}
		var values []any
		switch p.Type {
		case spec.Int:
			for v := int64(p.Min); v <= int64(p.Max); v += p.Step {
				values = append(values, v)
			}
		case spec.Categorical:
			values = p.Values
		case spec.Constant:
			values = []any{p.Value}
		case spec.Float:
			for _, x := range p.Points {
				values = append(values, x)
			}
		}
		for _, v := range values {
			cur[p.Name] = v
			loop(i+1, cur)
		}
		delete(cur, p.Name)
	}
	loop(0, hptype.Params{})
	return out
}
