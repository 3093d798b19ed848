package digits

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Metric names that TrainEpoch and Train report.
const (
	MetricValLoss     = "val_loss"
	MetricValAccuracy = "val_accuracy"
	MetricTrainLoss   = "train_loss"
)

// rngStream is the second word of the PCG state; the first is the seed.
const rngStream = 0xd161_75a1

// Run is a digits-mlp training run that can be saved after any epoch and
// resumed exactly: a Run restored from a Save and trained on reports the
// same metrics, bit for bit, as the Run that was saved would have.
//
// An epoch's time grows about linearly with HiddenUnits and hardly depends on
// the other parameters. On one core of an AMD EPYC server (BenchmarkTrainEpoch)
// it takes about 4 ms at 64 units, 15 ms at 256, 50 ms at 1024 and 0.2 s at
// the 4096 maximum, so a caller that must stop by a deadline can stop between
// epochs: EpochDuration tells how long the next one is likely to take, and an
// epoch cut short by ctx is rolled back, so Save still works after it.
//
// A Run is not safe for concurrent use.
type Run struct {
	cfg   Config
	data  *dataset
	pcg   *rand.PCG // the source of rng, kept to save its state
	rng   *rand.Rand
	m     *mlp
	order []int // the training images in the order of the last shuffle
	epoch int   // epochs completed

	// The state at the start of the epoch in progress, to go back to when
	// the epoch does not complete.
	undo struct {
		param, vel layers
		order      []int
		pcg        rand.PCG // a PCG is two words with no pointers: a copy is a snapshot
	}

	slowest time.Duration // the longest TrainEpoch so far
}

// NewRun validates cfg and returns a run at epoch 0 with freshly
// initialised weights.
func NewRun(cfg Config) (*Run, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	data, err := loadData()
	if err != nil {
		return nil, err
	}
	pcg := rand.NewPCG(uint64(cfg.Seed), rngStream)
	rng := rand.New(pcg)
	r := &Run{
		cfg:   cfg,
		data:  data,
		pcg:   pcg,
		rng:   rng,
		m:     newMLP(cfg.HiddenUnits, rng),
		order: make([]int, data.train.len()),
	}
	for i := range r.order {
		r.order[i] = i
	}
	r.undo.param = newLayers(cfg.HiddenUnits)
	r.undo.vel = newLayers(cfg.HiddenUnits)
	r.undo.order = make([]int, len(r.order))
	return r, nil
}

// Epoch returns the number of epochs completed.
func (r *Run) Epoch() int { return r.epoch }

// Epochs returns the number of epochs the run trains in all, cfg.Epochs.
func (r *Run) Epochs() int { return r.cfg.Epochs }

// Config returns the run's configuration.
func (r *Run) Config() Config { return r.cfg }

// EpochDuration returns how long the slowest TrainEpoch of this Run took,
// failed ones included, or 0 before the first. It is a measure of this
// process on this machine and is not part of the saved state.
func (r *Run) EpochDuration() time.Duration { return r.slowest }

// TrainEpoch trains epoch Epoch()+1: it shuffles the training split, takes
// one SGD step per mini-batch and then calls report with val_loss (mean
// cross-entropy on the validation split), val_accuracy (fraction of
// validation images classified right) and train_loss (mean cross-entropy over
// the epoch's mini-batches, each measured before its step), all with Step =
// the new epoch number.
//
// TrainEpoch checks ctx between mini-batches and returns an error wrapping
// ctx.Err() when it is done. It returns an error wrapping ErrDiverged when the
// loss stops being finite, and an error when all Epochs() are already
// trained. When it returns an error it has reported nothing and the Run is
// as it was before the call, so Save still saves the last completed epoch.
func (r *Run) TrainEpoch(ctx context.Context, report func(hptype.Metric)) error {
	if r.epoch >= r.cfg.Epochs {
		return fmt.Errorf("%s: all %d epochs are trained; there is no epoch %d to train (raise %s to train on)",
			Name, r.cfg.Epochs, r.epoch+1, ParamEpochs)
	}
	start := time.Now()
	defer func() { r.slowest = max(r.slowest, time.Since(start)) }()
	r.checkpointUndo()
	epoch := r.epoch + 1
	r.rng.Shuffle(len(r.order), func(i, j int) { r.order[i], r.order[j] = r.order[j], r.order[i] })
	var sum float64
	for first := 0; first < len(r.order); first += r.cfg.BatchSize {
		if err := ctx.Err(); err != nil {
			r.rollBack()
			return fmt.Errorf("%s: stopped in epoch %d of %d, which is abandoned (the run stays at epoch %d): %w",
				Name, epoch, r.cfg.Epochs, r.epoch, err)
		}
		loss := r.m.step(&r.data.train, r.order[first:min(first+r.cfg.BatchSize, len(r.order))], r.cfg)
		if !finite(loss) {
			r.rollBack()
			return diverged(r.cfg, epoch, loss)
		}
		sum += loss
	}
	valLoss, valAccuracy := r.m.evaluate(&r.data.val)
	if !finite(valLoss) {
		r.rollBack()
		return diverged(r.cfg, epoch, valLoss)
	}
	r.epoch = epoch
	step := float64(epoch)
	report(hptype.Metric{Step: step, Name: MetricValLoss, Value: valLoss})
	report(hptype.Metric{Step: step, Name: MetricValAccuracy, Value: valAccuracy})
	report(hptype.Metric{Step: step, Name: MetricTrainLoss, Value: sum / float64(len(r.order))})
	return nil
}

// checkpointUndo records the state that an epoch changes, for rollBack.
func (r *Run) checkpointUndo() {
	copy(r.undo.param.all, r.m.param.all)
	copy(r.undo.vel.all, r.m.vel.all)
	copy(r.undo.order, r.order)
	r.undo.pcg = *r.pcg
}

// rollBack returns to the state checkpointUndo recorded. The gradients need
// nothing: every step clears them.
func (r *Run) rollBack() {
	copy(r.m.param.all, r.undo.param.all)
	copy(r.m.vel.all, r.undo.vel.all)
	copy(r.order, r.undo.order)
	*r.pcg = r.undo.pcg
}

// Train trains the network that cfg describes for cfg.Epochs epochs,
// reporting each epoch's metrics as Run.TrainEpoch does. It returns an error
// wrapping ctx.Err() when ctx is done first and one wrapping ErrDiverged when
// the loss stops being finite.
func Train(ctx context.Context, cfg Config, report func(hptype.Metric)) error {
	r, err := NewRun(cfg)
	if err != nil {
		return err
	}
	for r.Epoch() < r.Epochs() {
		if err := r.TrainEpoch(ctx, report); err != nil {
			return err
		}
	}
	return nil
}
