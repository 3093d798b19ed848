package search

import "math"

// Test functions for the model-based samplers, from the optimisation
// literature (Dixon and Szegő, "The Global Optimization Problem: An
// Introduction", 1978; the definitions of Surjanovic and Bingham's Virtual
// Library of Simulation Experiments).

// braninMin is the global minimum of branin, reached at (-pi, 12.275),
// (pi, 2.275) and (9.42478, 2.475).
const braninMin = 0.397887

// branin is the Branin-Hoo function on x1 in [-5, 10], x2 in [0, 15].
func branin(x1, x2 float64) float64 {
	const (
		a = 1
		b = 5.1 / (4 * math.Pi * math.Pi)
		c = 5 / math.Pi
		r = 6
		s = 10
		t = 1 / (8 * math.Pi)
	)
	u := x2 - b*x1*x1 + c*x1 - r
	return a*u*u + s*(1-t)*math.Cos(x1) + s
}

// hartmann6Min is the global minimum of hartmann6.
const hartmann6Min = -3.32237

// hartmann6 is the six-dimensional Hartmann function on [0, 1]^6.
func hartmann6(x [6]float64) float64 {
	alpha := [4]float64{1.0, 1.2, 3.0, 3.2}
	a := [4][6]float64{
		{10, 3, 17, 3.5, 1.7, 8},
		{0.05, 10, 17, 0.1, 8, 14},
		{3, 3.5, 1.7, 10, 17, 8},
		{17, 8, 0.05, 10, 0.1, 14},
	}
	p := [4][6]float64{
		{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
		{0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
		{0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
		{0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381},
	}
	var f float64
	for i := range 4 {
		var e float64
		for j := range 6 {
			d := x[j] - p[i][j]
			e += a[i][j] * d * d
		}
		f -= alpha[i] * math.Exp(-e)
	}
	return f
}
