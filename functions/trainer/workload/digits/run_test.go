package digits

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// recorder collects reported metrics in order.
type recorder []hptype.Metric

func (r *recorder) report(m hptype.Metric) { *r = append(*r, m) }

func newRun(t testing.TB, cfg Config) *Run {
	t.Helper()
	r, err := NewRun(cfg)
	if err != nil {
		t.Fatalf("NewRun(%+v): %v", cfg, err)
	}
	return r
}

func trainEpochs(t testing.TB, r *Run, n int, rec *recorder) {
	t.Helper()
	for range n {
		if err := r.TrainEpoch(context.Background(), rec.report); err != nil {
			t.Fatalf("TrainEpoch at epoch %d: %v", r.Epoch(), err)
		}
	}
}

func save(t testing.TB, r *Run) map[string][]byte {
	t.Helper()
	shards, err := r.Save()
	if err != nil {
		t.Fatalf("Save at epoch %d: %v", r.Epoch(), err)
	}
	return shards
}

// storeAndLoad writes the shards to files in a new directory and reads them
// back, as a checkpoint store would.
func storeAndLoad(t *testing.T, shards map[string][]byte) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	for name, data := range shards {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string][]byte{}
	for _, e := range entries {
		if loaded[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return loaded
}

// sameMetrics fails unless got and want are the same metrics with
// bit-identical values.
func sameMetrics(t *testing.T, what string, got, want []hptype.Metric) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d metrics, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Step != w.Step || math.Float64bits(g.Value) != math.Float64bits(w.Value) {
			t.Fatalf("%s: metric %d = %+v, want %+v bit for bit", what, i, g, w)
		}
	}
}

// sameShards fails unless two checkpoints hold the same bytes.
func sameShards(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d shards, want %d", what, len(got), len(want))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || string(g) != string(w) {
			t.Fatalf("%s: shard %q differs (%d bytes, want %d)", what, name, len(g), len(w))
		}
	}
}

func TestResumeIsExact(t *testing.T) {
	t.Parallel()
	small := defaults(t, 7)
	small.HiddenUnits, small.BatchSize, small.Epochs = 10, 100, 12 // 1437 is not a multiple of 100
	noMomentum := defaults(t, 8)
	noMomentum.HiddenUnits, noMomentum.Momentum, noMomentum.WeightDecay, noMomentum.Epochs = 8, 0, 0, 12
	for _, cfg := range []Config{small, noMomentum} {
		t.Run(fmt.Sprintf("hidden=%d,batch=%d,momentum=%v", cfg.HiddenUnits, cfg.BatchSize, cfg.Momentum), func(t *testing.T) {
			t.Parallel()
			var want recorder
			whole := newRun(t, cfg)
			trainEpochs(t, whole, cfg.Epochs, &want)
			wantShards := save(t, whole)

			var viaTrain recorder
			if err := Train(context.Background(), cfg, viaTrain.report); err != nil {
				t.Fatal(err)
			}
			sameMetrics(t, "Train", viaTrain, want)

			for _, split := range [][]int{
				{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
				{3, 4, 5},
				{0, 11, 0, 1},
			} {
				var got recorder
				var shards map[string][]byte
				for _, n := range split {
					r := newRun(t, cfg)
					if shards != nil {
						if err := r.Restore(shards); err != nil {
							t.Fatalf("split %v: Restore: %v", split, err)
						}
					}
					trainEpochs(t, r, n, &got)
					shards = storeAndLoad(t, save(t, r))
				}
				sameMetrics(t, fmt.Sprintf("split %v", split), got, want)
				sameShards(t, fmt.Sprintf("split %v: final checkpoint", split), shards, wantShards)
			}
		})
	}
}

func TestResumeWithMoreEpochs(t *testing.T) {
	t.Parallel()
	cfg := defaults(t, 3)
	cfg.HiddenUnits, cfg.Epochs = 16, 4
	first := newRun(t, cfg)
	var got recorder
	trainEpochs(t, first, 4, &got)
	if err := first.TrainEpoch(context.Background(), got.report); err == nil || !strings.Contains(err.Error(), "all 4 epochs are trained") {
		t.Fatalf("TrainEpoch past Epochs = %v, want an error saying all epochs are trained", err)
	}

	cfg.Epochs = 7
	second := newRun(t, cfg)
	if err := second.Restore(save(t, first)); err != nil {
		t.Fatalf("Restore into a run with more epochs: %v", err)
	}
	trainEpochs(t, second, 3, &got)

	var want recorder
	trainEpochs(t, newRun(t, cfg), 7, &want)
	sameMetrics(t, "4 epochs then 3 more", got, want)
}

// cancelAfter is a context that reports itself cancelled from its n+1st call
// of Err on, so that a test can stop TrainEpoch after n mini-batches.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n == 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

func TestFailedEpochLeavesRunUnchanged(t *testing.T) {
	t.Parallel()
	cfg := defaults(t, 5)
	cfg.HiddenUnits, cfg.Epochs = 16, 3
	r := newRun(t, cfg)
	var want recorder
	trainEpochs(t, newRun(t, cfg), 3, &want)

	var got recorder
	trainEpochs(t, r, 1, &got)
	before := save(t, r)
	for _, n := range []int{0, 1, 20, 44} { // 1437/32 rounds up to 45 mini-batches
		err := r.TrainEpoch(&cancelAfter{Context: context.Background(), n: n}, got.report)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped in epoch 2 of 3, which is abandoned (the run stays at epoch 1)") {
			t.Fatalf("TrainEpoch cancelled after %d mini-batches = %v, want context.Canceled saying the epoch is abandoned", n, err)
		}
		if r.Epoch() != 1 {
			t.Fatalf("Epoch after a cancelled epoch = %d, want 1", r.Epoch())
		}
		sameShards(t, fmt.Sprintf("checkpoint after cancelling after %d mini-batches", n), save(t, r), before)
	}
	trainEpochs(t, r, 2, &got)
	sameMetrics(t, "training on after cancelled epochs", got, want)
	if r.EpochDuration() <= 0 {
		t.Errorf("EpochDuration = %v after training, want > 0", r.EpochDuration())
	}

	cfg.LearningRate = 1e6
	r = newRun(t, cfg)
	before = save(t, r)
	var none recorder
	if err := r.TrainEpoch(context.Background(), none.report); !errors.Is(err, ErrDiverged) {
		t.Fatalf("TrainEpoch with learning_rate 1e6 = %v, want ErrDiverged", err)
	}
	if len(none) != 0 {
		t.Errorf("a diverged epoch reported %v, want nothing", none)
	}
	sameShards(t, "checkpoint after a diverged epoch", save(t, r), before)
}

func TestSaveAtStart(t *testing.T) {
	t.Parallel()
	cfg := defaults(t, 9)
	cfg.HiddenUnits, cfg.Epochs = 8, 2
	r := newRun(t, cfg)
	fresh := save(t, r)
	if r.Epoch() != 0 || r.Epochs() != 2 || r.Config() != cfg {
		t.Errorf("new run: Epoch %d, Epochs %d, Config %+v; want 0, 2, %+v", r.Epoch(), r.Epochs(), r.Config(), cfg)
	}
	trainEpochs(t, r, 2, new(recorder))
	if err := r.Restore(fresh); err != nil {
		t.Fatal(err)
	}
	if r.Epoch() != 0 {
		t.Errorf("Epoch after restoring the epoch-0 checkpoint = %d, want 0", r.Epoch())
	}
	sameShards(t, "restored epoch-0 checkpoint", save(t, r), fresh)
}

// reseal returns a copy of shards whose state shard has been changed by edit
// and given a valid checksum, so that the checks after the checksum's run.
func reseal(t *testing.T, shards map[string][]byte, edit func(*stateShard)) map[string][]byte {
	t.Helper()
	var st stateShard
	if err := json.Unmarshal(shards[ShardState], &st); err != nil {
		t.Fatal(err)
	}
	edit(&st)
	var err error
	if st.CRC, err = st.checksum(); err != nil {
		t.Fatal(err)
	}
	out := maps.Clone(shards)
	if out[ShardState], err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	return out
}

// with returns a copy of shards with shard name set to data, or removed
// when data is nil.
func with(shards map[string][]byte, name string, data []byte) map[string][]byte {
	out := maps.Clone(shards)
	if data == nil {
		delete(out, name)
	} else {
		out[name] = data
	}
	return out
}

// flip returns a copy of data with one bit flipped at offset i (from the
// end when negative).
func flip(data []byte, i int) []byte {
	out := bytes.Clone(data)
	if i < 0 {
		i += len(out)
	}
	out[i] ^= 0x10
	return out
}

func TestRestoreErrors(t *testing.T) {
	t.Parallel()
	base := defaults(t, 11)
	base.HiddenUnits, base.Epochs = 12, 5
	checkpoint := func(cfg Config, epochs int) map[string][]byte {
		r := newRun(t, cfg)
		trainEpochs(t, r, epochs, new(recorder))
		return save(t, r)
	}
	good := checkpoint(base, 2)
	other := func(edit func(*Config)) map[string][]byte {
		cfg := base
		edit(&cfg)
		return checkpoint(cfg, 2)
	}
	weights, optimizer, state := good[ShardWeights], good[ShardOptimizer], good[ShardState]
	for _, tc := range []struct {
		name   string
		shards map[string][]byte
		is     error
		want   string
	}{
		{"no shards", map[string][]byte{}, ErrBadCheckpoint, `the "optimizer" shard is missing (the checkpoint has none`},
		{"no weights", with(good, ShardWeights, nil), ErrBadCheckpoint, `the "weights" shard is missing (the checkpoint has "optimizer", "state"; it needs "optimizer", "state", "weights")`},
		{"extra shard", with(good, "model.pt", []byte("x")), ErrBadCheckpoint, `unexpected shard "model.pt"`},
		{"weights truncated", with(good, ShardWeights, weights[:len(weights)-100]), ErrBadCheckpoint, "weights shard: damaged checkpoint: checksum mismatch"},
		{"weights empty", with(good, ShardWeights, []byte{}), ErrBadCheckpoint, "weights shard: damaged checkpoint: 0 bytes, shorter than the 32-byte header and trailer"},
		{"weights bit flip", with(good, ShardWeights, flip(weights, 1000)), ErrBadCheckpoint, "weights shard: damaged checkpoint: checksum mismatch"},
		{"weights trailer flip", with(good, ShardWeights, flip(weights, -1)), ErrBadCheckpoint, "weights shard: damaged checkpoint: checksum mismatch"},
		{"weights bad magic", with(good, ShardWeights, flip(weights, 0)), ErrBadCheckpoint, `does not start with "HPDM"`},
		{"optimizer bit flip", with(good, ShardOptimizer, flip(optimizer, 2000)), ErrBadCheckpoint, "optimizer shard: damaged checkpoint: checksum mismatch"},
		{"shards swapped", with(with(good, ShardWeights, optimizer), ShardOptimizer, weights), ErrBadCheckpoint, "weights shard: damaged checkpoint: it holds kind 2, want 1; the shards were swapped"},
		{"weights of another epoch", with(good, ShardWeights, checkpoint(base, 3)[ShardWeights]), ErrBadCheckpoint, "weights shard: damaged checkpoint: it is from epoch 3, the state shard from epoch 2"},
		{"weights of another run", with(good, ShardWeights, other(func(c *Config) { c.Seed++ })[ShardWeights]), ErrBadCheckpoint, "is not the"},
		{"weights of another width", with(good, ShardWeights, other(func(c *Config) { c.HiddenUnits++ })[ShardWeights]), ErrBadCheckpoint, "network 64x13x10, this run's is 64x12x10"},
		{"state not JSON", with(good, ShardState, weights), ErrBadCheckpoint, "state shard: damaged checkpoint: not the JSON object Save writes"},
		{"state truncated", with(good, ShardState, state[:len(state)/2]), ErrBadCheckpoint, "state shard: damaged checkpoint: not the JSON object"},
		{"state empty", with(good, ShardState, []byte{}), ErrBadCheckpoint, "state shard: damaged checkpoint"},
		{"state edited", with(good, ShardState, bytes.Replace(state, []byte(`"epoch":2`), []byte(`"epoch":1`), 1)), ErrBadCheckpoint, "state shard: damaged checkpoint: checksum mismatch"},
		{"state trailing data", with(good, ShardState, append(bytes.Clone(state), "{}"...)), ErrBadCheckpoint, "not the JSON object"},
		{"newer format", reseal(t, good, func(s *stateShard) { s.Format = 2 }), ErrCheckpointMismatch, "checkpoint format version 2; this trainer reads only version 1"},
		{"other workload", reseal(t, good, func(s *stateShard) { s.Workload = "mnist" }), ErrCheckpointMismatch, `workload "mnist", not "digits-mlp"`},
		{"other data", reseal(t, good, func(s *stateShard) { s.DataCRC++ }), ErrCheckpointMismatch, "another copy of the embedded data set"},
		{"negative epoch", reseal(t, good, func(s *stateShard) { s.Epoch = -1 }), ErrBadCheckpoint, "epoch -1 is negative"},
		{"order repeats", reseal(t, good, func(s *stateShard) { s.Order[5] = s.Order[6] }), ErrBadCheckpoint, "order: entry 6"},
		{"order short", reseal(t, good, func(s *stateShard) { s.Order = s.Order[1:] }), ErrBadCheckpoint, "order: 1436 entries, want 1437"},
		{"order out of range", reseal(t, good, func(s *stateShard) { s.Order[0] = trainSize }), ErrBadCheckpoint, "order: entry 0 = 1437 is out of range"},
		{"bad rng", reseal(t, good, func(s *stateShard) { s.RNG = s.RNG[:5] }), ErrBadCheckpoint, "state shard: damaged checkpoint: rng:"},
		{"hidden_units", other(func(c *Config) { c.HiddenUnits = 13 }), ErrCheckpointMismatch, "made with hidden_units = 13, this run has hidden_units = 12"},
		{"batch_size", other(func(c *Config) { c.BatchSize = 64 }), ErrCheckpointMismatch, "made with batch_size = 64, this run has batch_size = 32"},
		{"learning_rate", other(func(c *Config) { c.LearningRate = 0.05 }), ErrCheckpointMismatch, "made with learning_rate = 0.05, this run has learning_rate = 0.1"},
		{"momentum", other(func(c *Config) { c.Momentum = 0.5 }), ErrCheckpointMismatch, "made with momentum = 0.5, this run has momentum = 0.9"},
		{"weight_decay", other(func(c *Config) { c.WeightDecay = 0 }), ErrCheckpointMismatch, "made with weight_decay = 0, this run has weight_decay = 0.0001"},
		{"seed", other(func(c *Config) { c.Seed = 12 }), ErrCheckpointMismatch, "made with seed = 12, this run has seed = 11"},
		{"past epochs", func() map[string][]byte {
			cfg := base
			cfg.Epochs = 8
			return checkpoint(cfg, 6)
		}(), ErrCheckpointMismatch, "at epoch 6, past this run's epochs = 5; raise epochs to at least 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t, base)
			trainEpochs(t, r, 1, new(recorder))
			before := save(t, r)
			err := r.Restore(tc.shards)
			if err == nil {
				t.Fatal("Restore succeeded, want an error")
			}
			if !errors.Is(err, tc.is) || !strings.HasPrefix(err.Error(), Name+": restore checkpoint: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Restore = %q, want an error wrapping %v, starting %q and containing %q", err, tc.is, Name+": restore checkpoint: ", tc.want)
			}
			if r.Epoch() != 1 {
				t.Errorf("Epoch after a failed Restore = %d, want 1", r.Epoch())
			}
			sameShards(t, "checkpoint after a failed Restore", save(t, r), before)
		})
	}
}

// FuzzRestore checks that Restore rejects damaged checkpoints with an error,
// never a panic, and that whatever it accepts saves back to a checkpoint it
// accepts again.
func FuzzRestore(f *testing.F) {
	cfg := defaults(f, 1)
	cfg.HiddenUnits, cfg.Epochs = 2, 3
	r := newRun(f, cfg)
	trainEpochs(f, r, 1, new(recorder))
	good := save(f, r)
	f.Add(good[ShardWeights], good[ShardOptimizer], good[ShardState])
	f.Add(good[ShardOptimizer], good[ShardWeights], good[ShardState])
	f.Add(good[ShardWeights][:40], good[ShardOptimizer], good[ShardState][:100])
	f.Add([]byte{}, []byte("HPDM"), []byte(`{"format":1}`))
	f.Fuzz(func(t *testing.T, weights, optimizer, state []byte) {
		r, err := NewRun(cfg)
		if err != nil {
			t.Fatal(err)
		}
		shards := map[string][]byte{ShardWeights: weights, ShardOptimizer: optimizer, ShardState: state}
		if err := r.Restore(shards); err != nil {
			if !errors.Is(err, ErrBadCheckpoint) && !errors.Is(err, ErrCheckpointMismatch) {
				t.Fatalf("Restore = %v, want it to wrap ErrBadCheckpoint or ErrCheckpointMismatch", err)
			}
			return
		}
		again, err := r.Save()
		if err != nil {
			t.Fatal(err)
		}
		if err := newRun(t, cfg).Restore(again); err != nil {
			t.Fatalf("Restore of the Save of an accepted checkpoint: %v", err)
		}
	})
}

// BenchmarkTrainEpoch measures one epoch, setup excluded, for a few widths
// of the hidden layer.
func BenchmarkTrainEpoch(b *testing.B) {
	for _, hidden := range []int{64, 256, 1024, maxHiddenUnits} {
		b.Run(fmt.Sprintf("hidden=%d", hidden), func(b *testing.B) {
			cfg := defaults(b, 1)
			cfg.HiddenUnits, cfg.Epochs = hidden, maxEpochs
			r := newRun(b, cfg)
			b.ReportAllocs()
			epochs := 0
			for b.Loop() {
				if r.Epoch() == r.Epochs() {
					b.StopTimer()
					r = newRun(b, cfg)
					b.StartTimer()
				}
				if err := r.TrainEpoch(context.Background(), func(hptype.Metric) {}); err != nil {
					b.Fatal(err)
				}
				epochs++
			}
			b.ReportMetric(float64(trainSize*epochs)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// BenchmarkCheckpoint measures Save and Restore of a 1024-unit network.
func BenchmarkCheckpoint(b *testing.B) {
	cfg := defaults(b, 1)
	cfg.HiddenUnits = 1024
	r := newRun(b, cfg)
	shards := save(b, r)
	size := 0
	for _, s := range shards {
		size += len(s)
	}
	b.Run("Save", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			if _, err := r.Save(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Restore", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			if err := r.Restore(shards); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestInherit takes over another run's checkpoint, as a PBT exploit does:
// Restore refuses it for its other hyperparameters, Inherit accepts it
// unless the hidden units (the state's shape) differ, and training goes on
// from the donor's epoch with the inheriting run's own learning rate.
func TestInherit(t *testing.T) {
	t.Parallel()
	donorCfg := defaults(t, 3)
	donorCfg.HiddenUnits, donorCfg.Epochs = 16, 6
	donor := newRun(t, donorCfg)
	trainEpochs(t, donor, 3, new(recorder))
	shards := save(t, donor)

	cfg := donorCfg
	cfg.LearningRate, cfg.Momentum, cfg.Seed = donorCfg.LearningRate*1.2, 0.8, 9
	heir := newRun(t, cfg)
	if err := heir.Restore(shards); !errors.Is(err, ErrCheckpointMismatch) {
		t.Fatalf("Restore of another run's checkpoint = %v, want ErrCheckpointMismatch", err)
	}
	if err := heir.Inherit(shards); err != nil {
		t.Fatalf("Inherit: %v", err)
	}
	if heir.Epoch() != 3 {
		t.Fatalf("epoch %d after Inherit, want the donor's 3", heir.Epoch())
	}
	var got, donorNext recorder
	trainEpochs(t, heir, 1, &got)
	trainEpochs(t, donor, 1, &donorNext)
	if fmt.Sprint(got) == fmt.Sprint(donorNext) {
		t.Errorf("the heir trained its 4th epoch exactly as the donor did; its own learning rate played no part")
	}
	if err := newRun(t, cfg).Restore(save(t, heir)); err != nil {
		t.Errorf("the heir's own checkpoint does not restore into its configuration: %v", err)
	}

	wide := cfg
	wide.HiddenUnits = 32
	if err := newRun(t, wide).Inherit(shards); !errors.Is(err, ErrCheckpointMismatch) || !strings.Contains(err.Error(), ParamHiddenUnits) {
		t.Errorf("Inherit with other hidden units = %v, want a mismatch naming %s", err, ParamHiddenUnits)
	}
}
