package spec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

func TestParamByName(t *testing.T) {
	s := defaults(floatX, Param{Name: "k", Type: Constant, Value: "a"})
	p, ok := s.ParamByName("k")
	if !ok || p != &s.Params[1] {
		t.Errorf("ParamByName(k) = %v, %v; want the second parameter", p, ok)
	}
	if p, ok := s.ParamByName("missing"); ok || p != nil {
		t.Errorf("ParamByName(missing) = %v, %v; want nil, false", p, ok)
	}
}

func TestActive(t *testing.T) {
	p := Param{Name: "beta", Type: Float, When: []Condition{
		{Param: "opt", Values: []any{"adam", "nadam"}},
		{Param: "n", Values: []any{int64(3), 4.5}},
	}}
	tests := []struct {
		name   string
		params hptype.Params
		want   bool
	}{
		{"all hold", hptype.Params{"opt": "adam", "n": int64(3)}, true},
		{"float equals int value", hptype.Params{"opt": "nadam", "n": 3.0}, true},
		{"int type from elsewhere", hptype.Params{"opt": "adam", "n": 3}, true},
		{"JSON number", hptype.Params{"opt": "adam", "n": json.Number("4.5")}, true},
		{"one fails", hptype.Params{"opt": "sgd", "n": int64(3)}, false},
		{"wrong number", hptype.Params{"opt": "adam", "n": int64(4)}, false},
		{"string is not a number", hptype.Params{"opt": "adam", "n": "3"}, false},
		{"missing parameter", hptype.Params{"opt": "adam"}, false},
		{"uncomparable value", hptype.Params{"opt": []any{"adam"}, "n": int64(3)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Active(tc.params); got != tc.want {
				t.Errorf("Active(%v) = %v, want %v", tc.params, got, tc.want)
			}
		})
	}
	if !(&Param{Name: "free"}).Active(nil) {
		t.Error("a parameter without conditions is not active")
	}
}

func TestGridValues(t *testing.T) {
	tests := []struct {
		p      Param
		want   []any
		wantOK bool
	}{
		{Param{Type: Int, Min: -3, Max: 4, Step: 3}, []any{int64(-3), int64(0), int64(3)}, true},
		{Param{Type: Int, Min: 2, Max: 2, Step: 1}, []any{int64(2)}, true},
		{Param{Type: Categorical, Values: []any{"a", int64(1), 2.5, true}}, []any{"a", int64(1), 2.5, true}, true},
		{Param{Type: Constant, Value: "x"}, []any{"x"}, true},
		{Param{Type: Float, Min: 0, Max: 1, Points: []float64{0, 0.5}}, []any{0.0, 0.5}, true},
		{Param{Type: Float, Min: 0, Max: 1}, nil, false},
	}
	for _, tc := range tests {
		got, ok := tc.p.GridValues()
		if !reflect.DeepEqual(got, tc.want) || ok != tc.wantOK {
			t.Errorf("GridValues of %+v = %v, %v; want %v, %v", tc.p, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestGridSize(t *testing.T) {
	ints := func(n int) Param { return Param{Name: "i", Type: Int, Min: 1, Max: float64(n), Step: 1} }
	tests := []struct {
		name   string
		params []Param
		want   int
		errMsg string
	}{
		{"product", []Param{ints(3), {Type: Categorical, Values: []any{"a", "b"}}, {Type: Constant, Value: 1.0}, {Type: Float, Points: []float64{1, 2}}}, 12, ""},
		{"at the limit", []Param{ints(1000), ints(1000), ints(1000)}, 1_000_000_000, ""},
		{"over the limit", []Param{ints(1000), ints(1000), ints(1001)}, 0, "more than 1000000000 points"},
		{"no overflow", []Param{ints(1 << 40), ints(1 << 40), ints(1 << 40), ints(1 << 40)}, 0, "more than 1000000000 points"},
		{"float without points", []Param{{Name: "lr", Type: Float, Max: 1}}, 0, "float parameter lr has no points"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := (&Spec{Params: tc.params}).GridSize()
			if tc.errMsg == "" && (err != nil || got != tc.want) {
				t.Errorf("GridSize = %d, %v; want %d", got, err, tc.want)
			}
			if tc.errMsg != "" && (err == nil || !strings.Contains(err.Error(), tc.errMsg)) {
				t.Errorf("GridSize error = %v, want one containing %q", err, tc.errMsg)
			}
		})
	}
}
