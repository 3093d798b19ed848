package digits

import (
	"fmt"
	"math"
	"math/rand/v2"
)

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func diverged(cfg Config, epoch int, loss float64) error {
	return fmt.Errorf("%s: %w in epoch %d (loss %v); lower %s (now %g)",
		Name, ErrDiverged, epoch, loss, ParamLearningRate, cfg.LearningRate)
}

// layers holds one value per parameter of the network: the parameters
// themselves, their gradients or their momentum. The four layers are views
// of one array, all, in the order w1, b1, w2, b2, which is also the order of
// the values in a checkpoint.
type layers struct {
	all []float64
	w1  []float64 // inputs x hidden, input-major: w1[i*hidden+j] links input i to unit j
	b1  []float64 // hidden
	w2  []float64 // hidden x classes, unit-major
	b2  []float64 // classes
}

// numParams is the number of parameters of a network with hidden units.
func numParams(hidden int) int {
	return inputs*hidden + hidden + hidden*classes + classes
}

func newLayers(hidden int) layers {
	all := make([]float64, numParams(hidden))
	cut := func(n int) []float64 {
		s := all[:n:n]
		all = all[n:]
		return s
	}
	l := layers{all: all}
	l.w1 = cut(inputs * hidden)
	l.b1 = cut(hidden)
	l.w2 = cut(hidden * classes)
	l.b2 = cut(classes)
	return l
}

// mlp is the network with everything a training step needs, allocated once.
type mlp struct {
	hidden int
	param  layers
	grad   layers // sums over the current mini-batch
	vel    layers // momentum
	h      []float64
	dh     []float64
}

// newMLP initialises the weights from rng: He initialisation for the ReLU
// layer, Glorot for the softmax layer, biases at zero.
func newMLP(hidden int, rng *rand.Rand) *mlp {
	m := &mlp{
		hidden: hidden,
		param:  newLayers(hidden),
		grad:   newLayers(hidden),
		vel:    newLayers(hidden),
	}
	scratch := make([]float64, 2*hidden)
	m.h, m.dh = scratch[:hidden:hidden], scratch[hidden:]
	std1 := math.Sqrt(2.0 / inputs)
	for i := range m.param.w1 {
		m.param.w1[i] = rng.NormFloat64() * std1
	}
	std2 := math.Sqrt(2.0 / float64(hidden+classes))
	for i := range m.param.w2 {
		m.param.w2[i] = rng.NormFloat64() * std2
	}
	return m
}

// forward computes the hidden activations into m.h and the logits into z.
func (m *mlp) forward(x []float64, z *[classes]float64) {
	h := m.h
	copy(h, m.param.b1)
	for i, xi := range x {
		if xi == 0 {
			continue // about half the pixels are blank
		}
		row := m.param.w1[i*m.hidden : (i+1)*m.hidden]
		h := h[:len(row)]
		for j, w := range row {
			h[j] += xi * w
		}
	}
	*z = [classes]float64(m.param.b2)
	for j, hj := range h {
		if hj <= 0 {
			h[j] = 0 // ReLU; a NaN goes on and shows up in the loss
			continue
		}
		w := (*[classes]float64)(m.param.w2[j*classes:])
		for k := range classes {
			z[k] += hj * w[k]
		}
	}
}

// softmax turns logits into probabilities in place and returns the
// cross-entropy of label y.
func softmax(z *[classes]float64, y int) float64 {
	top := z[0]
	for _, v := range z[1:] {
		top = max(top, v)
	}
	zy := z[y] - top
	var sum float64
	for k := range classes {
		z[k] = math.Exp(z[k] - top)
		sum += z[k]
	}
	for k := range classes {
		z[k] /= sum
	}
	return math.Log(sum) - zy
}

// backward adds the gradients of one image to m.grad; dz holds the
// gradient of the loss with respect to the logits, m.h the activations of
// the forward pass.
func (m *mlp) backward(x []float64, dz *[classes]float64) {
	g2 := (*[classes]float64)(m.grad.b2)
	for k := range classes {
		g2[k] += dz[k]
	}
	dh := m.dh[:len(m.h)]
	for j, hj := range m.h {
		if hj == 0 {
			dh[j] = 0 // inactive unit: no gradient through it, none to its weights
			continue
		}
		w := (*[classes]float64)(m.param.w2[j*classes:])
		g := (*[classes]float64)(m.grad.w2[j*classes:])
		var s float64
		for k := range classes {
			g[k] += hj * dz[k]
			s += w[k] * dz[k]
		}
		dh[j] = s
	}
	gb1 := m.grad.b1[:len(dh)]
	for j, d := range dh {
		gb1[j] += d
	}
	for i, xi := range x {
		if xi == 0 {
			continue
		}
		row := m.grad.w1[i*m.hidden : (i+1)*m.hidden]
		row = row[:len(dh)]
		for j, d := range dh {
			row[j] += xi * d
		}
	}
}

// step trains on one mini-batch of s and returns the sum of its losses,
// measured before the update.
func (m *mlp) step(s *split, batch []int, cfg Config) float64 {
	var loss float64
	var z [classes]float64
	for _, i := range batch {
		x := s.row(i)
		m.forward(x, &z)
		loss += softmax(&z, s.y[i])
		z[s.y[i]]-- // d(cross-entropy)/d(logits) = p - onehot(y)
		m.backward(x, &z)
	}
	scale := 1 / float64(len(batch))
	lr, mom, wd := cfg.LearningRate, cfg.Momentum, cfg.WeightDecay
	sgd(m.param.w1, m.grad.w1, m.vel.w1, scale, lr, mom, wd)
	sgd(m.param.b1, m.grad.b1, m.vel.b1, scale, lr, mom, 0)
	sgd(m.param.w2, m.grad.w2, m.vel.w2, scale, lr, mom, wd)
	sgd(m.param.b2, m.grad.b2, m.vel.b2, scale, lr, mom, 0)
	return loss
}

// sgd applies one step of SGD with classical momentum and L2 weight decay to
// p, given the summed gradients g (which it clears) and the velocities v.
func sgd(p, g, v []float64, scale, lr, mom, wd float64) {
	g, v = g[:len(p)], v[:len(p)]
	for i, pi := range p {
		vi := mom*v[i] - lr*(g[i]*scale+wd*pi)
		v[i] = vi
		p[i] = pi + vi
		g[i] = 0
	}
}

// evaluate returns the mean cross-entropy and the accuracy on s.
func (m *mlp) evaluate(s *split) (loss, accuracy float64) {
	var z [classes]float64
	correct := 0
	for i := range s.len() {
		m.forward(s.row(i), &z)
		best := 0
		for k := 1; k < classes; k++ {
			if z[k] > z[best] {
				best = k
			}
		}
		if best == s.y[i] {
			correct++
		}
		loss += softmax(&z, s.y[i])
	}
	n := float64(s.len())
	return loss / n, float64(correct) / n
}
