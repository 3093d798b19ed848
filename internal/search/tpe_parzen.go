package search

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/hpsearch/hpsearch/internal/spec"
)

// parzen is a Parzen estimator over one or more parameters (Bergstra et
// al. 2011, section 4): a weighted mixture of components, one per trial and
// a last one for the prior, each the product of one kernel per parameter.
type parzen struct {
	dims []kernels
	// logw is each component's normalised log weight; cum the running sum
	// of the weights, to draw a component.
	logw, cum []float64
}

// kernels are the kernels of every component in one parameter.
type kernels struct {
	p *param
	// lo and hi bound a numerical parameter's coordinates (param.bounds);
	// flat is set when they are equal and the parameter has one value.
	lo, hi float64
	flat   bool
	// mu and sigma are each Gaussian's centre and bandwidth, cdfLo the
	// mass below lo and mass the mass within [lo, hi], lognorm the log of
	// the normaliser: sigma sqrt(2 pi) mass for a float (sqrt(2 pi) mass
	// when not normalised by the bandwidth), mass for an int.
	mu, sigma, cdfLo, mass, lognorm []float64
	// choice is a categorical component's observed choice, -1 for the
	// prior; logHit, logMiss and logUniform are the log probabilities of
	// the observed choice, of another, and of any under the prior.
	choice                      []int
	logHit, logMiss, logUniform float64
}

// point is a candidate's coordinate in one parameter.
type point struct {
	// x is a numerical coordinate (param.coord); for an int, a and b bound
	// the coordinates that round to it.
	x, a, b float64
	// choice is a categorical's index.
	choice int
}

// tpeScratch is memory reused by the density computations of one Sample.
type tpeScratch struct {
	acc []float64
	ord []sortedMu
}

// sortedMu is a kernel's centre and index, for sorting.
type sortedMu struct {
	mu float64
	i  int
}

// fitParzen fits an estimator over ps to rows, the trials' coordinates
// (len(ps) per trial) in trial-number order. With normalised unset, float
// kernels are not divided by their bandwidth (see the independent TPE).
func fitParzen(ps []*param, rows []float64, sc *tpeScratch, normalised bool) *parzen {
	n := len(rows) / len(ps)
	w := orderWeights(n)
	e := &parzen{dims: make([]kernels, len(ps)), logw: make([]float64, n+1), cum: make([]float64, n+1)}
	var total float64
	for i, x := range w {
		total += x
		e.cum[i] = total
	}
	for i, x := range w {
		e.logw[i] = math.Log(x / total)
	}
	mus := make([]float64, n+1)
	for d, p := range ps {
		k := &e.dims[d]
		k.p = p
		if p.Type == spec.Categorical {
			size := float64(len(p.Values))
			k.choice = make([]int, n+1)
			for i := range n {
				k.choice[i] = int(rows[i*len(ps)+d])
			}
			k.choice[n] = -1
			k.logHit = math.Log((1 + tpePriorWeight/size) / (1 + tpePriorWeight))
			k.logMiss = math.Log(tpePriorWeight / size / (1 + tpePriorWeight))
			k.logUniform = -math.Log(size)
			continue
		}
		k.lo, k.hi = p.bounds()
		if k.hi <= k.lo {
			k.flat = true
			continue
		}
		for i := range n {
			mus[i] = rows[i*len(ps)+d]
		}
		mus[n] = (k.lo + k.hi) / 2
		k.fit(slices.Clone(mus), sc, normalised)
	}
	return e
}

// orderWeights returns the weights of n trials in trial-number order (the
// newest tpeFlatWeights weigh 1, the older ones ramp linearly from 1/n)
// followed by the prior's.
func orderWeights(n int) []float64 {
	w := make([]float64, n+1)
	ramp := n - tpeFlatWeights
	for i := range n {
		switch {
		case i >= ramp:
			w[i] = 1
		case ramp == 1:
			w[i] = 1 / float64(n)
		default:
			w[i] = 1/float64(n) + (1-1/float64(n))*float64(i)/float64(ramp-1)
		}
	}
	w[n] = tpePriorWeight
	return w
}

// fit sets the Gaussians centred on mus, the last of which is the prior's
// centre: each bandwidth is the larger gap to its neighbours in sorted
// order (lo and hi bound the ends; the two ends use their inner gap),
// clipped to [range / min(100, 1 + kernels), range]; the prior's is the
// range.
func (k *kernels) fit(mus []float64, sc *tpeScratch, normalised bool) {
	m := len(mus)
	order := sc.sorted(mus)
	at := func(j int) float64 { // sorted mus with lo and hi at the ends
		switch j {
		case -1:
			return k.lo
		case m:
			return k.hi
		}
		return order[j].mu
	}
	width := k.hi - k.lo
	minSigma := width / math.Min(100, float64(1+m))
	k.mu, k.sigma = mus, make([]float64, m)
	for j := range m {
		s := math.Max(at(j)-at(j-1), at(j+1)-at(j))
		switch {
		case m >= 2 && j == 0:
			s = at(1) - at(0)
		case m >= 2 && j == m-1:
			s = at(m-1) - at(m-2)
		}
		k.sigma[order[j].i] = clamp(s, minSigma, width)
	}
	k.sigma[m-1] = width
	k.cdfLo, k.mass, k.lognorm = make([]float64, m), make([]float64, m), make([]float64, m)
	for i, mu := range mus {
		s := k.sigma[i]
		k.cdfLo[i] = phi((k.lo - mu) / s)
		k.mass[i] = phi((k.hi-mu)/s) - k.cdfLo[i]
		k.lognorm[i] = math.Log(k.mass[i])
		switch {
		case k.p.Type == spec.Float && normalised:
			k.lognorm[i] += math.Log(s * math.Sqrt(2*math.Pi))
		case k.p.Type == spec.Float:
			k.lognorm[i] += math.Log(math.Sqrt(2 * math.Pi))
		}
	}
}

// sorted returns mus with their indices in ascending order, ties by
// index, in reused memory.
func (sc *tpeScratch) sorted(mus []float64) []sortedMu {
	sc.ord = sc.ord[:0]
	for i, mu := range mus {
		sc.ord = append(sc.ord, sortedMu{mu, i})
	}
	slices.SortFunc(sc.ord, func(a, b sortedMu) int {
		switch { // no NaN: coord rejects it
		case a.mu < b.mu:
			return -1
		case a.mu > b.mu:
			return 1
		}
		return a.i - b.i
	})
	return sc.ord
}

// phi is the standard normal distribution function.
func phi(z float64) float64 {
	return 0.5 * math.Erfc(-z/math.Sqrt2)
}

// draw sets c to a sample of e: a component drawn by weight, then each
// parameter from that component's kernel.
func (e *parzen) draw(rng *rand.Rand, c []point) {
	i := sort.SearchFloat64s(e.cum, rng.Float64()*e.cum[len(e.cum)-1])
	i = min(i, len(e.cum)-1)
	for d := range e.dims {
		c[d] = e.dims[d].draw(rng, i)
	}
}

// draw samples component i's kernel.
func (k *kernels) draw(rng *rand.Rand, i int) point {
	p := k.p
	switch {
	case p.Type == spec.Categorical:
		if k.choice[i] >= 0 && rng.Float64()*(1+tpePriorWeight) < 1 {
			return point{choice: k.choice[i]}
		}
		return point{choice: rng.IntN(len(p.Values))}
	case k.flat:
		return point{x: k.lo, a: k.lo, b: k.lo}
	}
	// Invert the distribution function on the part of it within [lo, hi].
	u := k.cdfLo[i] + rng.Float64()*k.mass[i]
	y := clamp(k.mu[i]+k.sigma[i]*math.Sqrt2*math.Erfinv(2*u-1), k.lo, k.hi)
	switch {
	case p.Type == spec.Float:
		return point{x: y}
	case p.Log:
		v := clamp(math.Round(math.Exp(y)), p.Min, p.Max)
		return point{x: math.Log(v), a: math.Log(v - 0.5), b: math.Log(v + 0.5)}
	}
	h := float64(p.step) / 2
	v := p.Min + float64(p.step)*clamp(math.Round((y-p.Min)/float64(p.step)), 0, float64(p.count-1))
	return point{x: v, a: v - h, b: v + h}
}

// tpeCutoff is the distance, in bandwidths, beyond which a kernel counts
// as zero. There its density is below e^-50 / (sigma sqrt(2 pi) mass),
// with sigma at least range/100 (the magic clip) and mass at least 0.34
// (the centre lies within the range and sigma is at most the range), while
// the prior kernel alone contributes more than e^-1/8 / (range sqrt(2 pi))
// / (n+1) everywhere: the n kernels cut add a relative error below 1e-17
// n^2. Cutting them skips most of the logarithms, exponentials and
// distribution functions for large histories.
const tpeCutoff = 10

// logPDF returns the log density of e at c: for an int, of the mass of the
// coordinates that round to it.
func (e *parzen) logPDF(c []point, sc *tpeScratch) float64 {
	acc := append(sc.acc[:0], e.logw...)
	sc.acc = acc
	cut := math.Inf(-1)
	for d := range e.dims {
		k, x := &e.dims[d], c[d]
		switch {
		case k.p.Type == spec.Categorical:
			for i, ch := range k.choice {
				switch ch {
				case -1:
					acc[i] += k.logUniform
				case x.choice:
					acc[i] += k.logHit
				default:
					acc[i] += k.logMiss
				}
			}
		case k.flat:
		case k.p.Type == spec.Float:
			for i, mu := range k.mu {
				z := (x.x - mu) / k.sigma[i]
				if z > tpeCutoff || z < -tpeCutoff {
					acc[i] = cut
					continue
				}
				acc[i] -= 0.5*z*z + k.lognorm[i]
			}
		default:
			for i, mu := range k.mu {
				if acc[i] == cut || (x.a-mu)/k.sigma[i] > tpeCutoff || (mu-x.b)/k.sigma[i] > tpeCutoff {
					acc[i] = cut
					continue
				}
				acc[i] += logBinMass(x.a, x.b, mu, k.sigma[i]) - k.lognorm[i]
			}
		}
	}
	top := cut
	for _, a := range acc {
		if a > top {
			top = a
		}
	}
	if top == cut {
		return top
	}
	var sum float64
	for _, a := range acc {
		// e^-40 is below the precision of the sum.
		if a > top-40 {
			sum += math.Exp(a - top)
		}
	}
	return top + math.Log(sum)
}

// logBinMass is the log of the mass of the Gaussian (mu, sigma) within
// [a, b]: computed in the nearer tail for precision, and approximated by
// the density at the centre times the width where even that underflows.
func logBinMass(a, b, mu, sigma float64) float64 {
	za, zb := (a-mu)/sigma, (b-mu)/sigma
	var m float64
	if za > 0 {
		m = phi(-za) - phi(-zb)
	} else {
		m = phi(zb) - phi(za)
	}
	if m > 0 {
		return math.Log(m)
	}
	z := (za + zb) / 2
	return -0.5*z*z - math.Log(sigma*math.Sqrt(2*math.Pi)) + math.Log(b-a)
}
