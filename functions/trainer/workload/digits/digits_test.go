package digits

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// train runs Train and returns the metrics it reported, by name, one value
// per epoch.
func train(t testing.TB, cfg Config) map[string][]float64 {
	t.Helper()
	got := map[string][]float64{}
	err := Train(context.Background(), cfg, func(m hptype.Metric) {
		if want := float64(len(got[m.Name]) + 1); m.Step != want {
			t.Errorf("metric %s at step %v, want %v", m.Name, m.Step, want)
		}
		got[m.Name] = append(got[m.Name], m.Value)
	})
	if err != nil {
		t.Fatalf("Train(%+v): %v", cfg, err)
	}
	return got
}

func defaults(t testing.TB, seed int64) Config {
	t.Helper()
	cfg, err := ConfigFromParams(nil, seed)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func last(xs []float64) float64 { return xs[len(xs)-1] }

func TestSplit(t *testing.T) {
	d, err := loadData()
	if err != nil {
		t.Fatal(err)
	}
	if d.train.len() != trainSize || d.val.len() != valSize {
		t.Fatalf("split is %d train / %d validation, want %d / %d", d.train.len(), d.val.len(), trainSize, valSize)
	}
	var perClass [classes]int
	for _, y := range d.val.y {
		perClass[y]++
	}
	for c, n := range perClass {
		if n < 34 || n > 37 {
			t.Errorf("class %d has %d validation images, want about a fifth of ~180", c, n)
		}
	}
	for i, x := range d.train.x {
		if x < 0 || x > 1 {
			t.Fatalf("train pixel %d = %v, want in [0, 1]", i, x)
		}
	}
}

func TestTrainLearns(t *testing.T) {
	cfg := defaults(t, 1)
	got := train(t, cfg)
	for _, name := range []string{MetricValLoss, MetricValAccuracy, MetricTrainLoss} {
		if len(got[name]) != cfg.Epochs {
			t.Fatalf("%s reported %d times, want once per epoch (%d)", name, len(got[name]), cfg.Epochs)
		}
	}
	acc := last(got[MetricValAccuracy])
	t.Logf("default config: val_accuracy %.4f, val_loss %.4f, train_loss %.4f",
		acc, last(got[MetricValLoss]), last(got[MetricTrainLoss]))
	if acc < 0.90 {
		t.Errorf("val_accuracy after %d epochs = %.4f, want >= 0.90", cfg.Epochs, acc)
	}
	if first, end := got[MetricTrainLoss][0], last(got[MetricTrainLoss]); end >= first {
		t.Errorf("train_loss went from %v to %v, want it to fall", first, end)
	}
}

func TestTrainSillyConfigIsWorse(t *testing.T) {
	cfg := defaults(t, 1)
	cfg.LearningRate, cfg.Epochs = 1e-6, 1
	got := train(t, cfg)
	if acc := last(got[MetricValAccuracy]); acc > 0.5 {
		t.Errorf("val_accuracy with learning_rate 1e-6 for 1 epoch = %.4f, want it clearly worse (<= 0.5)", acc)
	}
	if loss := last(got[MetricValLoss]); loss < 1.5 {
		t.Errorf("val_loss with learning_rate 1e-6 for 1 epoch = %.4f, want close to ln(10) ≈ 2.3", loss)
	}
}

func TestTrainDeterministic(t *testing.T) {
	cfg := defaults(t, 42)
	cfg.Epochs = 3
	a, b := train(t, cfg), train(t, cfg)
	for name, xs := range a {
		for i, x := range xs {
			if math.Float64bits(x) != math.Float64bits(b[name][i]) {
				t.Errorf("%s at epoch %d: %v then %v, want bit-identical", name, i+1, x, b[name][i])
			}
		}
	}
	cfg.Seed = 43
	c := train(t, cfg)
	if last(c[MetricTrainLoss]) == last(a[MetricTrainLoss]) {
		t.Errorf("seeds 42 and 43 gave the same train_loss %v, want the seed to matter", last(a[MetricTrainLoss]))
	}
}

func TestTrainDiverges(t *testing.T) {
	cfg := defaults(t, 1)
	cfg.LearningRate = 1e6
	err := Train(context.Background(), cfg, func(hptype.Metric) {})
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("Train with learning_rate 1e6 = %v, want ErrDiverged", err)
	}
	if !strings.Contains(err.Error(), "learning_rate") {
		t.Errorf("error %q does not tell to lower learning_rate", err)
	}
}

func TestTrainStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := defaults(t, 1)
	cfg.Epochs = 1000
	reports := 0
	err := Train(ctx, cfg, func(hptype.Metric) {
		reports++
		cancel() // stop during the first epoch's reports
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Train after cancel = %v, want context.Canceled", err)
	}
	if reports != 3 {
		t.Errorf("got %d reports, want the 3 of epoch 1", reports)
	}
}

func TestTrainRejectsInvalidConfig(t *testing.T) {
	err := Train(context.Background(), Config{}, func(hptype.Metric) {})
	if err == nil || !strings.Contains(err.Error(), ParamLearningRate) {
		t.Fatalf("Train(Config{}) = %v, want an error naming %s", err, ParamLearningRate)
	}
}

func TestConfigFromParams(t *testing.T) {
	cfg, err := ConfigFromParams(hptype.Params{
		"learning_rate": 0.05,
		"hidden_units":  int64(128),
		"weight_decay":  0.0,
		"batch_size":    float64(16), // as it comes back from JSON
		"momentum":      0.5,
		"epochs":        int64(3),
	}, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{LearningRate: 0.05, HiddenUnits: 128, WeightDecay: 0, BatchSize: 16, Momentum: 0.5, Epochs: 3, Seed: 7}
	if cfg != want {
		t.Errorf("ConfigFromParams = %+v, want %+v", cfg, want)
	}
	if got, want := defaults(t, 3), (Config{LearningRate: 0.1, HiddenUnits: 64, WeightDecay: 1e-4, BatchSize: 32, Momentum: 0.9, Epochs: 20, Seed: 3}); got != want {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
}

func TestConfigFromParamsErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params hptype.Params
		want   string // substrings of the error, all required
	}{
		{"zero learning rate", hptype.Params{"learning_rate": 0.0}, `"learning_rate" = 0 is out of range`},
		{"negative learning rate", hptype.Params{"learning_rate": -0.1}, `"learning_rate" = -0.1 is out of range`},
		{"NaN learning rate", hptype.Params{"learning_rate": math.NaN()}, `"learning_rate" = NaN`},
		{"infinite learning rate", hptype.Params{"learning_rate": math.Inf(1)}, `"learning_rate" = +Inf`},
		{"string learning rate", hptype.Params{"learning_rate": "0.1"}, `"learning_rate" is string, not a number`},
		{"no hidden units", hptype.Params{"hidden_units": int64(0)}, `"hidden_units" = 0 is out of range: must be in 1..4096`},
		{"too many hidden units", hptype.Params{"hidden_units": int64(4097)}, `"hidden_units" = 4097`},
		{"huge hidden units", hptype.Params{"hidden_units": int64(1) << 40}, `"hidden_units" = 2147483647`},
		{"fractional hidden units", hptype.Params{"hidden_units": 64.5}, `"hidden_units" is 64.5, not an integer`},
		{"negative weight decay", hptype.Params{"weight_decay": -1e-4}, `"weight_decay" = -0.0001`},
		{"zero batch", hptype.Params{"batch_size": int64(0)}, `"batch_size" = 0`},
		{"batch larger than the data", hptype.Params{"batch_size": int64(1438)}, `"batch_size" = 1438 is out of range: must be in 1..1437`},
		{"negative momentum", hptype.Params{"momentum": -0.1}, `"momentum" = -0.1`},
		{"momentum of one", hptype.Params{"momentum": 1.0}, `"momentum" = 1 is out of range: must be in [0, 1)`},
		{"no epochs", hptype.Params{"epochs": int64(0)}, `"epochs" = 0`},
		{"too many epochs", hptype.Params{"epochs": int64(1001)}, `"epochs" = 1001`},
		{"bool epochs", hptype.Params{"epochs": true}, `"epochs" is bool`},
		{"unknown parameter", hptype.Params{"learning_rat": 0.1}, `unknown parameter "learning_rat"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigFromParams(tc.params, 1)
			if err == nil {
				t.Fatalf("ConfigFromParams(%v) succeeded, want an error containing %q", tc.params, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), Name+": ") {
				t.Errorf("ConfigFromParams(%v) = %q, want it to start with %q and contain %q", tc.params, err, Name+": ", tc.want)
			}
		})
	}
}

func TestTrainAllocations(t *testing.T) {
	cfg := defaults(t, 1)
	cfg.Epochs = 1
	if _, err := loadData(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(3, func() {
		if err := Train(context.Background(), cfg, func(hptype.Metric) {}); err != nil {
			t.Fatal(err)
		}
	})
	// A fixed setup cost (network, buffers, shuffle order); nothing per
	// mini-batch or per image.
	if allocs > 30 {
		t.Errorf("Train of one epoch made %v allocations, want a fixed handful", allocs)
	}
}
