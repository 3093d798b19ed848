package bench

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

func TestSummarize(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name string
		xs   []float64
		want Summary
	}{
		{"odd", []float64{5, 1, 4, 2, 3}, Summary{Median: 3, Q1: 2, Q3: 4, N: 5}},
		{"even", []float64{4, 1, 3, 2}, Summary{Median: 2.5, Q1: 1.75, Q3: 3.25, N: 4}},
		{"one", []float64{7}, Summary{Median: 7, Q1: 7, Q3: 7, N: 1}},
		{"nan left out", []float64{math.NaN(), 1, 3}, Summary{Median: 2, Q1: 1.5, Q3: 2.5, N: 2}},
		{"infinite upper half", []float64{1, 2, inf, inf}, Summary{Median: inf, Q1: 1.75, Q3: inf, N: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summarize(tc.xs); got != tc.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tc.xs, got, tc.want)
			}
		})
	}
	if got := Summarize([]float64{math.NaN()}); got.N != 0 || !math.IsNaN(got.Median) {
		t.Errorf("Summarize(NaN) = %+v, want N 0 and a NaN median", got)
	}
}

func TestSummaryJSON(t *testing.T) {
	b, err := json.Marshal([]Summary{{Median: 1.5, Q1: 1, Q3: 2, N: 3}, Summarize(nil), {Median: 1, Q1: 1, Q3: math.Inf(1), N: 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"median":1.5,"q1":1,"q3":2,"n":3},{"median":null,"q1":null,"q3":null,"n":0},{"median":1,"q1":1,"q3":null,"n":2}]`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

func TestSimpleRegret(t *testing.T) {
	values := []float64{5, 3, 4, 1.5, 2}
	got := SimpleRegret(values, 1, []int{1, 2, 4, 5, 6})
	want := []float64{4, 2, 0.5, 0.5, math.NaN()}
	if !slices.EqualFunc(got, want, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
		t.Errorf("SimpleRegret = %v, want %v", got, want)
	}
}
