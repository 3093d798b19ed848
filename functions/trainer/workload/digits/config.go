// Package digits is the built-in workload "digits-mlp": a small multilayer
// perceptron trained with mini-batch SGD on the UCI handwritten digits data
// set, which is embedded in the binary. It needs no files, no network and no
// third-party code, so hpsearch can do real work with no setup at all.
//
// The network is 64 inputs → HiddenUnits ReLU units → 10 softmax outputs,
// trained on a fixed 1437-image training split and evaluated after every
// epoch on a fixed 360-image validation split, the same for every trial.
// Training is deterministic: the same Config, Seed included, gives
// bit-identical metrics. Train runs all epochs in one go; a Run trains one
// epoch at a time and can be saved as a checkpoint after any of them and
// restored in another process, which then goes on exactly as the first
// would have.
package digits

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Name is the workload's name in a space file (trainer.builtin).
const Name = "digits-mlp"

// Parameter names that ConfigFromParams reads.
const (
	ParamLearningRate = "learning_rate"
	ParamHiddenUnits  = "hidden_units"
	ParamWeightDecay  = "weight_decay"
	ParamBatchSize    = "batch_size"
	ParamMomentum     = "momentum"
	ParamEpochs       = "epochs"
)

// Config holds the hyperparameters of one training run. The zero value is
// not valid; start from ConfigFromParams.
type Config struct {
	// LearningRate is the SGD step size (learning_rate). Defaults to 0.1;
	// must be > 0.
	LearningRate float64
	// HiddenUnits is the width of the hidden layer (hidden_units). Defaults
	// to 64; must be in 1..4096.
	HiddenUnits int
	// WeightDecay is the L2 penalty on the weights, not the biases
	// (weight_decay). Defaults to 1e-4; must be >= 0.
	WeightDecay float64
	// BatchSize is the number of images per SGD step (batch_size). Defaults
	// to 32; must be in 1..1437 (the size of the training split).
	BatchSize int
	// Momentum is the classical momentum coefficient (momentum). Defaults to
	// 0.9; must be in [0, 1).
	Momentum float64
	// Epochs is the number of passes over the training split (epochs).
	// Defaults to 20; must be in 1..1000.
	Epochs int
	// Seed drives weight initialisation and the per-epoch shuffle.
	Seed int64
}

// Limits of the integer parameters.
const (
	maxHiddenUnits = 4096
	maxEpochs      = 1000
)

// defaultConfig returns the defaults documented on Config's fields.
func defaultConfig(seed int64) Config {
	return Config{
		LearningRate: 0.1,
		HiddenUnits:  64,
		WeightDecay:  1e-4,
		BatchSize:    32,
		Momentum:     0.9,
		Epochs:       20,
		Seed:         seed,
	}
}

// ConfigFromParams reads a trial's parameters into a Config. Every parameter
// is optional and takes the default documented on Config when absent. A
// parameter of the wrong type, a value out of range or a name the workload
// does not know is an error that names the parameter.
func ConfigFromParams(p hptype.Params, seed int64) (Config, error) {
	cfg := defaultConfig(seed)
	floats := map[string]*float64{
		ParamLearningRate: &cfg.LearningRate,
		ParamWeightDecay:  &cfg.WeightDecay,
		ParamMomentum:     &cfg.Momentum,
	}
	ints := map[string]*int{
		ParamHiddenUnits: &cfg.HiddenUnits,
		ParamBatchSize:   &cfg.BatchSize,
		ParamEpochs:      &cfg.Epochs,
	}
	// Read in sorted order so that the first error reported is stable.
	for _, name := range slices.Sorted(maps.Keys(p)) {
		if f, ok := floats[name]; ok {
			v, err := p.Float(name)
			if err != nil {
				return Config{}, fmt.Errorf("%s: %w", Name, err)
			}
			*f = v
			continue
		}
		if n, ok := ints[name]; ok {
			v, err := p.Int(name)
			if err != nil {
				return Config{}, fmt.Errorf("%s: %w", Name, err)
			}
			// Clamp so that a huge value still fails validation below
			// rather than wrapping around on conversion.
			*n = int(max(min(v, math.MaxInt32), math.MinInt32))
			continue
		}
		return Config{}, fmt.Errorf("%s: unknown parameter %q; remove it from the space file (the workload reads %s)",
			Name, name, strings.Join(paramNames(), ", "))
	}
	if err := cfg.validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func paramNames() []string {
	return []string{ParamLearningRate, ParamHiddenUnits, ParamWeightDecay,
		ParamBatchSize, ParamMomentum, ParamEpochs}
}

// validate checks the ranges documented on Config's fields. Errors name the
// parameter as a space file spells it.
func (c Config) validate() error {
	outOfRange := func(name string, v any, want string) error {
		return fmt.Errorf("%s: parameter %q = %v is out of range: %s; fix its range in the space file",
			Name, name, v, want)
	}
	switch {
	case !(c.LearningRate > 0) || math.IsInf(c.LearningRate, 1):
		return outOfRange(ParamLearningRate, c.LearningRate, "must be a finite number > 0")
	case c.HiddenUnits < 1 || c.HiddenUnits > maxHiddenUnits:
		return outOfRange(ParamHiddenUnits, c.HiddenUnits, fmt.Sprintf("must be in 1..%d", maxHiddenUnits))
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 1):
		return outOfRange(ParamWeightDecay, c.WeightDecay, "must be a finite number >= 0")
	case c.BatchSize < 1 || c.BatchSize > trainSize:
		return outOfRange(ParamBatchSize, c.BatchSize, fmt.Sprintf("must be in 1..%d (the training split's size)", trainSize))
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return outOfRange(ParamMomentum, c.Momentum, "must be in [0, 1)")
	case c.Epochs < 1 || c.Epochs > maxEpochs:
		return outOfRange(ParamEpochs, c.Epochs, fmt.Sprintf("must be in 1..%d", maxEpochs))
	}
	return nil
}

// ErrDiverged is wrapped by the errors of Train and Run.TrainEpoch when the
// loss stops being a finite number. Retrying the same configuration will
// diverge again.
var ErrDiverged = errors.New("training diverged")
