package bench

import (
	"encoding/json"
	"math"
	"slices"
)

// Summary is the median and inter-quartile range of a sample.
type Summary struct {
	Median float64 `json:"median"`
	// Q1 and Q3 are the first and third quartiles.
	Q1 float64 `json:"q1"`
	Q3 float64 `json:"q3"`
	// N is the sample size.
	N int `json:"n"`
}

// Summarize returns the median and quartiles of xs, interpolated linearly
// between order statistics (R's type 7, NumPy's default). NaN values are
// left out; a sample with no other values summarises to NaN.
func Summarize(xs []float64) Summary {
	s := slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	if len(s) == 0 {
		return Summary{Median: math.NaN(), Q1: math.NaN(), Q3: math.NaN()}
	}
	slices.Sort(s)
	return Summary{Median: quantile(s, 0.5), Q1: quantile(s, 0.25), Q3: quantile(s, 0.75), N: len(s)}
}

// MarshalJSON writes the summary with null for a value that is not finite
// (JSON has no NaN or infinity).
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Median *float64 `json:"median"`
		Q1     *float64 `json:"q1"`
		Q3     *float64 `json:"q3"`
		N      int      `json:"n"`
	}{finite(s.Median), finite(s.Q1), finite(s.Q3), s.N})
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// quantile returns the q-quantile of sorted, which is not empty.
func quantile(sorted []float64, q float64) float64 {
	h := q * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	frac := h - float64(lo)
	if frac == 0 || sorted[lo] == sorted[lo+1] {
		// Also keeps an infinite value from interpolating to NaN.
		return sorted[lo]
	}
	return sorted[lo] + frac*(sorted[lo+1]-sorted[lo])
}

// SimpleRegret returns, for each count in at, the best value among the
// first count values minus optimum: the simple regret after that many
// evaluations. A count beyond len(values) gives NaN.
func SimpleRegret(values []float64, optimum float64, at []int) []float64 {
	out := make([]float64, len(at))
	for i, n := range at {
		if n <= 0 || n > len(values) {
			out[i] = math.NaN()
			continue
		}
		out[i] = slices.Min(values[:n]) - optimum
	}
	return out
}
