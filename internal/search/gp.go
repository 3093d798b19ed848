package search

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// gpSampler is Gaussian-process Bayesian optimisation (Snoek, Larochelle
// and Adams, "Practical Bayesian Optimization of Machine Learning
// Algorithms", NeurIPS 2012) over the unit hypercube of a space of float
// and int parameters.
//
// Trials 0 to modelStartup-1, and any trial with fewer than two completed
// trials before it, are the random sampler's. Otherwise the completed
// trials numbered below n, their values standardised, are fitted by a
// zero-mean Gaussian process with a Matérn 5/2 kernel with one lengthscale
// per dimension (ARD), a signal variance and a noise variance, chosen by
// maximising the log marginal likelihood (Rasmussen and Williams,
// "Gaussian Processes for Machine Learning", 2006, §2.2, §4.2 and §5.4.1)
// with L-BFGS from two starts, within bounds. The trials still queued or
// running are then added to the process with the worst value seen, a
// constant liar (Ginsbourger, Le Riche and Carraro, "Kriging is
// well-suited to parallelize optimization", 2010), so concurrent proposals
// spread out. The proposal maximises the logarithm of the expected
// improvement on the best value over gpCandidates uniform points and a
// pattern search from the best gpRefine of them. Failed and pruned trials
// are ignored. Ints are modelled as continuous and rounded.
//
// The result depends only on the seed, n and the trials numbered below n;
// fitting costs O(m³) for m trials per iteration.
type gpSampler struct {
	box  *box
	seed uint64
}

const (
	// gpCandidates is the number of random points the acquisition is
	// evaluated at.
	gpCandidates = 2000
	// gpRefine is the number of best candidates refined by pattern search.
	gpRefine = 5
	// gpFitIters bounds the L-BFGS iterations of each start of the
	// hyperparameter fit.
	gpFitIters = 40
)

// Bounds of the hyperparameters, for inputs in the unit hypercube and
// standardised outputs.
const (
	gpMinLength, gpMaxLength = 0.01, 20
	gpMinSignal, gpMaxSignal = 0.05, 20
	gpMinNoise, gpMaxNoise   = 1e-6, 0.5
)

// Sample implements Sampler.
func (s *gpSampler) Sample(ctx context.Context, n int, history []hptype.Trial) (hptype.Params, error) {
	if err := checkModelSample(ctx, n); err != nil {
		return nil, err
	}
	if n < modelStartup || s.box.space.dims == 0 {
		return s.box.random.Sample(ctx, n, nil)
	}
	var xs, pending [][]float64
	var ys []float64
	for _, p := range s.box.trials(history, n) {
		switch p.state {
		case boxDone:
			xs, ys = append(xs, p.x), append(ys, p.y)
		case boxPending:
			pending = append(pending, p.x)
		}
	}
	if len(ys) < 2 {
		return s.box.random.Sample(ctx, n, nil)
	}
	rng := rand.New(rand.NewPCG(mix(s.seed^0x6770), uint64(n))) // "gp"
	u := s.propose(rng, xs, ys, pending)
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return s.box.decode(ctx, n, u)
}

// propose returns the point that maximises the expected improvement given
// the completed points xs with values ys and the pending points.
func (s *gpSampler) propose(rng *rand.Rand, xs [][]float64, ys []float64, pending [][]float64) []float64 {
	d := s.box.space.dims
	mean, sd := gpMeanStd(ys)
	z := make([]float64, len(ys))
	for i, y := range ys {
		z[i] = (y - mean) / sd
	}
	h := fitGP(rng, xs, z, d)
	best, worst := slices.Min(z), slices.Max(z)
	all := append(slices.Clip(xs), pending...)
	zs := slices.Grow(slices.Clip(z), len(pending))
	for range pending {
		zs = append(zs, worst)
	}
	g, ok := newGP(all, zs, h)
	if !ok {
		// The lies made the kernel matrix singular: a pending point
		// duplicates another. Model the completed points alone.
		g, _ = newGP(xs, z, h)
	}
	acq := func(x []float64) float64 {
		mu, v := g.predict(x)
		return logEI(mu, math.Sqrt(v), best)
	}

	type cand struct {
		x []float64
		a float64
	}
	top := make([]cand, 0, gpRefine+1)
	for range gpCandidates {
		x := make([]float64, d)
		for k := range x {
			x[k] = rng.Float64()
		}
		a := acq(x)
		if len(top) == gpRefine && a <= top[gpRefine-1].a {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, a, func(c cand, a float64) int {
			if c.a > a {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, cand{x, a})
		if len(top) > gpRefine {
			top = top[:gpRefine]
		}
	}
	bestX, bestA := top[0].x, top[0].a
	for _, c := range top {
		if x, a := patternSearch(acq, c.x, c.a); a > bestA {
			bestX, bestA = x, a
		}
	}
	return bestX
}

// patternSearch climbs f from x by coordinate steps within the unit
// hypercube, halving the step when no step improves.
func patternSearch(f func([]float64) float64, x []float64, fx float64) ([]float64, float64) {
	x = slices.Clone(x)
	y := make([]float64, len(x))
	for step := 0.05; step > 1e-3; {
		improved := false
		for k := range x {
			for _, dir := range [2]float64{1, -1} {
				copy(y, x)
				y[k] = clamp(x[k]+dir*step, 0, 1)
				if fy := f(y); fy > fx {
					copy(x, y)
					fx, improved = fy, true
					break
				}
			}
		}
		if !improved {
			step /= 2
		}
	}
	return x, fx
}

// logEI is the logarithm of the expected improvement on best of a normal
// value with mean mu and standard deviation sd, to be minimised, computed
// without underflow far from best.
func logEI(mu, sd, best float64) float64 {
	z := (best - mu) / sd
	return math.Log(sd) + logH(z)
}

// logH is log(z Φ(z) + φ(z)), with an asymptotic series for very negative z
// where the sum cancels.
func logH(z float64) float64 {
	if z > -6 {
		cdf := 0.5 * math.Erfc(-z/math.Sqrt2)
		pdf := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
		return math.Log(z*cdf + pdf)
	}
	z2 := z * z
	return -z2/2 - 0.5*math.Log(2*math.Pi) - 2*math.Log(-z) + math.Log1p(-3/z2+15/(z2*z2)-105/(z2*z2*z2))
}

func gpMeanStd(ys []float64) (mean, sd float64) {
	for _, y := range ys {
		mean += y
	}
	mean /= float64(len(ys))
	for _, y := range ys {
		sd += (y - mean) * (y - mean)
	}
	sd = math.Sqrt(sd / float64(len(ys)))
	if !(sd > 1e-12) {
		sd = 1
	}
	return mean, sd
}

// gpHyper are a Matérn 5/2 ARD kernel's hyperparameters.
type gpHyper struct {
	lengths       []float64
	signal, noise float64
}

// matern52 is the Matérn 5/2 correlation at scaled distance r (Rasmussen
// and Williams, eq. 4.17).
func matern52(r float64) float64 {
	s := math.Sqrt(5) * r
	return (1 + s + s*s/3) * math.Exp(-s)
}

// gp is a Gaussian process conditioned on points x with values y.
type gp struct {
	x     [][]float64
	h     gpHyper
	chol  []float64
	alpha []float64
	// kx is scratch for predict.
	kx []float64
}

// newGP conditions a process with hyperparameters h on x and y. It reports
// false if the kernel matrix is singular.
func newGP(x [][]float64, y []float64, h gpHyper) (*gp, bool) {
	n := len(x)
	k := kernelMatrix(x, h, nil)
	if !cholesky(k, n) {
		return nil, false
	}
	alpha := slices.Clone(y)
	solveLower(k, n, alpha)
	solveUpperT(k, n, alpha)
	return &gp{x: x, h: h, chol: k, alpha: alpha, kx: make([]float64, n)}, true
}

// predict returns the posterior mean and variance of the latent function
// at x (Rasmussen and Williams, Algorithm 2.1).
func (g *gp) predict(x []float64) (mean, variance float64) {
	for i, xi := range g.x {
		g.kx[i] = g.h.signal * matern52(scaledDist(x, xi, g.h.lengths))
	}
	mean = vecDot(g.kx, g.alpha)
	solveLower(g.chol, len(g.x), g.kx)
	variance = g.h.signal - vecDot(g.kx, g.kx)
	return mean, max(variance, 1e-12*g.h.signal)
}

func scaledDist(a, b, lengths []float64) float64 {
	var r2 float64
	for k, l := range lengths {
		d := (a[k] - b[k]) / l
		r2 += d * d
	}
	return math.Sqrt(r2)
}

// kernelMatrix returns K + noise I for points x, in buf if it is large
// enough.
func kernelMatrix(x [][]float64, h gpHyper, buf []float64) []float64 {
	n := len(x)
	k := buf
	if cap(k) < n*n {
		k = make([]float64, n*n)
	}
	k = k[:n*n]
	for i := range n {
		k[i*n+i] = h.signal + h.noise + 1e-10
		for j := range i {
			v := h.signal * matern52(scaledDist(x[i], x[j], h.lengths))
			k[i*n+j], k[j*n+i] = v, v
		}
	}
	return k
}

// gpBounds returns the bounds of the log hyperparameters: d log
// lengthscales, the log signal variance and the log noise variance.
func gpBounds(d int) (lo, hi []float64) {
	lo, hi = make([]float64, d+2), make([]float64, d+2)
	for k := range d {
		lo[k], hi[k] = math.Log(gpMinLength), math.Log(gpMaxLength)
	}
	lo[d], hi[d] = math.Log(gpMinSignal), math.Log(gpMaxSignal)
	lo[d+1], hi[d+1] = math.Log(gpMinNoise), math.Log(gpMaxNoise)
	return lo, hi
}

// fitGP returns the hyperparameters that maximise the log marginal
// likelihood of y at x, searched by L-BFGS over unbounded coordinates that
// a gpLogistic maps into the bounds of the log hyperparameters, from the
// middle of the bounds and from a random point.
func fitGP(rng *rand.Rand, x [][]float64, y []float64, d int) gpHyper {
	lo, hi := gpBounds(d)
	f := &lmlFit{x: x, y: y, d: d, lo: lo, hi: hi}
	starts := [][]float64{make([]float64, d+2), make([]float64, d+2)}
	for k := range starts[1] {
		starts[1][k] = rng.NormFloat64()
	}
	var bestZ []float64
	bestF := math.Inf(1)
	for _, z := range starts {
		if fz := lbfgs(f.eval, z, gpFitIters); fz < bestF || bestZ == nil {
			bestZ, bestF = z, fz
		}
	}
	return f.hyper(bestZ)
}

// lmlFit is the negative log marginal likelihood of a Matérn 5/2 ARD
// process as a function of unbounded coordinates z.
type lmlFit struct {
	x      [][]float64
	y      []float64
	d      int
	lo, hi []float64
	k      []float64
}

func gpLogistic(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

func (f *lmlFit) hyper(z []float64) gpHyper {
	h := gpHyper{lengths: make([]float64, f.d)}
	for k := range f.d {
		h.lengths[k] = math.Exp(f.lo[k] + (f.hi[k]-f.lo[k])*gpLogistic(z[k]))
	}
	h.signal = math.Exp(f.lo[f.d] + (f.hi[f.d]-f.lo[f.d])*gpLogistic(z[f.d]))
	h.noise = math.Exp(f.lo[f.d+1] + (f.hi[f.d+1]-f.lo[f.d+1])*gpLogistic(z[f.d+1]))
	return h
}

// eval returns the negative log marginal likelihood at z and stores its
// gradient in grad (Rasmussen and Williams, eqs. 2.30 and 5.9), or +Inf if
// the kernel matrix is not positive definite.
func (f *lmlFit) eval(z, grad []float64) float64 {
	n, d := len(f.x), f.d
	h := f.hyper(z)
	f.k = kernelMatrix(f.x, h, f.k)
	l := f.k
	if !cholesky(l, n) {
		return math.Inf(1)
	}
	alpha := slices.Clone(f.y)
	solveLower(l, n, alpha)
	solveUpperT(l, n, alpha)
	nll := 0.5*vecDot(f.y, alpha) + 0.5*float64(n)*math.Log(2*math.Pi)
	for i := range n {
		nll += math.Log(l[i*n+i])
	}
	kinv := cholInverse(l, n)

	// dθ_j = -½ Σ_ij W_ij ∂K_ij/∂θ_j with W = ααᵀ - K⁻¹, θ the log
	// hyperparameters.
	clear(grad)
	s5 := math.Sqrt(5)
	diff := make([]float64, d)
	for i := range n {
		wii := alpha[i]*alpha[i] - kinv[i*n+i]
		grad[d] += wii * h.signal
		grad[d+1] += wii * h.noise
		for j := range i {
			w := 2 * (alpha[i]*alpha[j] - kinv[i*n+j])
			var r2 float64
			for k := range d {
				t := (f.x[i][k] - f.x[j][k]) / h.lengths[k]
				diff[k] = t * t
				r2 += diff[k]
			}
			r := math.Sqrt(r2)
			e := math.Exp(-s5 * r)
			grad[d] += w * h.signal * (1 + s5*r + 5*r2/3) * e
			// ∂k/∂log ℓ_k = σ² (5/3)(1 + √5 r) e^{-√5 r} (Δ_k/ℓ_k)².
			c := w * h.signal * 5 / 3 * (1 + s5*r) * e
			for k := range d {
				grad[k] += c * diff[k]
			}
		}
	}
	for j := range grad {
		s := gpLogistic(z[j])
		grad[j] *= -0.5 * (f.hi[j] - f.lo[j]) * s * (1 - s)
	}
	return nll
}

// lbfgs minimises f from x in place by limited-memory BFGS (Nocedal and
// Wright, "Numerical Optimization", 2006, Algorithm 7.4) with a
// backtracking Armijo line search, for at most iters iterations, and
// returns f at the result. f stores its gradient in its second argument
// and may return +Inf where it is undefined.
func lbfgs(f func(x, grad []float64) float64, x []float64, iters int) float64 {
	const memory = 6
	n := len(x)
	g := make([]float64, n)
	fx := f(x, g)
	if math.IsInf(fx, 1) {
		return fx
	}
	var ss, ys [][]float64
	var rhos []float64
	dir, xn, gn := make([]float64, n), make([]float64, n), make([]float64, n)
	alphas := make([]float64, memory)
	for range iters {
		// Two-loop recursion: dir = -H g.
		for i := range dir {
			dir[i] = -g[i]
		}
		for i := len(ss) - 1; i >= 0; i-- {
			alphas[i] = rhos[i] * vecDot(ss[i], dir)
			for k := range dir {
				dir[k] -= alphas[i] * ys[i][k]
			}
		}
		if m := len(ss); m > 0 {
			gamma := vecDot(ss[m-1], ys[m-1]) / vecDot(ys[m-1], ys[m-1])
			for k := range dir {
				dir[k] *= gamma
			}
		} else if norm := math.Sqrt(vecDot(g, g)); norm > 1 {
			for k := range dir {
				dir[k] /= norm
			}
		}
		for i := range ss {
			b := rhos[i] * vecDot(ys[i], dir)
			for k := range dir {
				dir[k] += ss[i][k] * (alphas[i] - b)
			}
		}
		slope := vecDot(g, dir)
		if slope >= 0 {
			return fx
		}
		step, fn := 1.0, math.Inf(1)
		for range 20 {
			for k := range xn {
				xn[k] = x[k] + step*dir[k]
			}
			if fn = f(xn, gn); fn <= fx+1e-4*step*slope {
				break
			}
			step /= 2
		}
		if !(fn <= fx+1e-4*step*slope) {
			return fx
		}
		s, y := make([]float64, n), make([]float64, n)
		for k := range s {
			s[k], y[k] = xn[k]-x[k], gn[k]-g[k]
		}
		done := fx-fn <= 1e-9*(1+math.Abs(fx))
		copy(x, xn)
		copy(g, gn)
		fx = fn
		if done {
			return fx
		}
		if sy := vecDot(s, y); sy > 1e-12 {
			if len(ss) == memory {
				ss, ys, rhos = ss[1:], ys[1:], rhos[1:]
			}
			ss, ys, rhos = append(ss, s), append(ys, y), append(rhos, 1/sy)
		}
	}
	return fx
}
