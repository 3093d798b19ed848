package search

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// cmaSampler is the (μ/μ_w, λ) covariance matrix adaptation evolution
// strategy with cumulative step-size adaptation and rank-one and rank-μ
// updates of the covariance (Hansen, "The CMA Evolution Strategy: A
// Tutorial", arXiv:1604.00772, 2016, with the default parameters of its
// Table 1 and positive weights only), over the unit hypercube of a space of
// float and int parameters.
//
// Trials 0 to modelStartup-1 are the random sampler's. Then generation g
// is trials modelStartup+gλ to modelStartup+(g+1)λ-1, λ = 4+⌊3 ln d⌋ for d
// dimensions. The sampler keeps no state: to propose trial n it replays
// the generations before n's from the history, starting from the centre of
// the hypercube with step size cmaSigma0, telling each generation whose
// trials have all finished, in order, up to the first that has not. Trial
// n is drawn from the distribution reached, so trials whose generation
// waits on a pending trial are drawn from the last distribution, and a
// restarted coordinator replays the same generations and proposes the
// same trials. A generation is ranked by value; failed and pruned trials
// rank last. Draws outside the hypercube are clipped to it, and a
// generation is told with the points its trials actually have (clipped
// and, for ints, rounded). The step size is capped at 1, the width of the
// hypercube.
type cmaSampler struct {
	box  *box
	seed uint64
}

// cmaSigma0 is the initial step size, in units of the hypercube's width.
const cmaSigma0 = 0.3

// Sample implements Sampler.
func (s *cmaSampler) Sample(ctx context.Context, n int, history []hptype.Trial) (hptype.Params, error) {
	if err := checkModelSample(ctx, n); err != nil {
		return nil, err
	}
	d := s.box.space.dims
	if n < modelStartup || d == 0 {
		return s.box.random.Sample(ctx, n, nil)
	}
	es := newCMA(d)
	byNumber := make(map[int]boxTrial)
	for _, p := range s.box.trials(history, n) {
		byNumber[p.number] = p
	}
	gen := make([]boxTrial, es.lambda)
replay:
	for g := range (n - modelStartup) / es.lambda {
		for k := range gen {
			p, ok := byNumber[modelStartup+g*es.lambda+k]
			if !ok || p.state == boxPending {
				break replay
			}
			gen[k] = p
		}
		es.tell(gen)
	}
	rng := rand.New(rand.NewPCG(mix(s.seed^0x636d61), uint64(n))) // "cma"
	return s.box.decode(ctx, n, es.ask(rng))
}

// cma is the state of the strategy and its constant parameters.
type cma struct {
	d, lambda, mu int
	weights       []float64
	// mueff is the variance-effective selection mass.
	mueff float64
	// cs and damps adapt the step size, cc and c1 the rank-one update,
	// cmu the rank-μ update; chiN is E‖N(0, I)‖.
	cs, damps, cc, c1, cmu, chiN float64

	mean  []float64
	sigma float64
	// c is the covariance matrix, b its eigenvectors (columns) and sd the
	// square roots of its eigenvalues: c = b diag(sd²) bᵀ.
	c, b, sd []float64
	// ps and pc are the evolution paths of the step size and covariance.
	ps, pc []float64
	// told counts the generations told.
	told int
}

// newCMA returns the initial state in d dimensions: mean at the centre,
// step size cmaSigma0, identity covariance.
func newCMA(d int) *cma {
	fd := float64(d)
	e := &cma{d: d, lambda: 4 + int(3*math.Log(fd))}
	e.mu = e.lambda / 2
	e.weights = make([]float64, e.mu)
	var sum, sum2 float64
	for i := range e.mu {
		w := math.Log(float64(e.lambda+1)/2) - math.Log(float64(i+1))
		e.weights[i] = w
		sum += w
	}
	for i := range e.weights {
		e.weights[i] /= sum
		sum2 += e.weights[i] * e.weights[i]
	}
	e.mueff = 1 / sum2
	e.cs = (e.mueff + 2) / (fd + e.mueff + 5)
	e.damps = 1 + 2*max(0, math.Sqrt((e.mueff-1)/(fd+1))-1) + e.cs
	e.cc = (4 + e.mueff/fd) / (fd + 4 + 2*e.mueff/fd)
	e.c1 = 2 / ((fd+1.3)*(fd+1.3) + e.mueff)
	e.cmu = min(1-e.c1, 2*(e.mueff-2+1/e.mueff)/((fd+2)*(fd+2)+e.mueff))
	e.chiN = math.Sqrt(fd) * (1 - 1/(4*fd) + 1/(21*fd*fd))

	e.mean = make([]float64, d)
	for i := range e.mean {
		e.mean[i] = 0.5
	}
	e.sigma = cmaSigma0
	e.c, e.b = make([]float64, d*d), make([]float64, d*d)
	e.sd = make([]float64, d)
	for i := range d {
		e.c[i*d+i], e.b[i*d+i], e.sd[i] = 1, 1, 1
	}
	e.ps, e.pc = make([]float64, d), make([]float64, d)
	return e
}

// ask draws a point m + σ B D z, z standard normal, clipped to the unit
// hypercube.
func (e *cma) ask(rng *rand.Rand) []float64 {
	d := e.d
	z := make([]float64, d)
	for i := range z {
		z[i] = e.sd[i] * rng.NormFloat64()
	}
	x := make([]float64, d)
	for i := range x {
		var s float64
		for j := range d {
			s += e.b[i*d+j] * z[j]
		}
		x[i] = clamp(e.mean[i]+e.sigma*s, 0, 1)
	}
	return x
}

// tell updates the state with one generation of finished trials
// (Hansen 2016, eqs. 39-47 with positive weights).
func (e *cma) tell(gen []boxTrial) {
	d := e.d
	ranked := slices.Clone(gen)
	slices.SortStableFunc(ranked, func(a, b boxTrial) int {
		if c := cmp.Compare(a.state, b.state); c != 0 {
			return c // done before failed
		}
		if a.state == boxDone {
			if c := cmp.Compare(a.y, b.y); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.number, b.number)
	})

	// Steps y_i = (x_i - m) / σ of the μ best, and their weighted mean.
	ys := make([][]float64, e.mu)
	yw := make([]float64, d)
	for i := range ys {
		ys[i] = make([]float64, d)
		for k := range d {
			ys[i][k] = (ranked[i].x[k] - e.mean[k]) / e.sigma
			yw[k] += e.weights[i] * ys[i][k]
		}
	}
	for k := range d {
		e.mean[k] = clamp(e.mean[k]+e.sigma*yw[k], 0, 1)
	}

	// C^{-1/2} yw = B D⁻¹ Bᵀ yw.
	bt := make([]float64, d)
	for j := range d {
		var s float64
		for k := range d {
			s += e.b[k*d+j] * yw[k]
		}
		bt[j] = s / e.sd[j]
	}
	csn := math.Sqrt(e.cs * (2 - e.cs) * e.mueff)
	for i := range d {
		var s float64
		for j := range d {
			s += e.b[i*d+j] * bt[j]
		}
		e.ps[i] = (1-e.cs)*e.ps[i] + csn*s
	}
	e.told++
	psNorm := math.Sqrt(vecDot(e.ps, e.ps))
	hsig := psNorm/math.Sqrt(1-math.Pow(1-e.cs, 2*float64(e.told))) < (1.4+2/(float64(d)+1))*e.chiN
	ccn := math.Sqrt(e.cc * (2 - e.cc) * e.mueff)
	for i := range d {
		e.pc[i] *= 1 - e.cc
		if hsig {
			e.pc[i] += ccn * yw[i]
		}
	}
	decay := 1 - e.c1 - e.cmu
	if !hsig {
		decay += e.c1 * e.cc * (2 - e.cc)
	}
	for i := range d {
		for j := 0; j <= i; j++ {
			v := decay*e.c[i*d+j] + e.c1*e.pc[i]*e.pc[j]
			for r, y := range ys {
				v += e.cmu * e.weights[r] * y[i] * y[j]
			}
			e.c[i*d+j], e.c[j*d+i] = v, v
		}
	}
	e.sigma *= math.Exp(e.cs / e.damps * (psNorm/e.chiN - 1))
	e.sigma = clamp(e.sigma, 1e-12, 1)

	vals, vecs := jacobiEigen(e.c, d)
	e.b = vecs
	for i, v := range vals {
		e.sd[i] = math.Sqrt(max(v, 1e-20))
	}
}
