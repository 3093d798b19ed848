package bench

import (
	"math"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// curveConfigs returns n configurations of the learning-curve problem from
// the random sampler.
func curveConfigs(t *testing.T, n int) []hptype.Params {
	t.Helper()
	s, err := search.New(LearningCurve{}.Spec(CurveStudy{Seed: 3, Configs: n, Workers: 1}))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]hptype.Params, n)
	for i := range out {
		if out[i], err = s.Sample(t.Context(), i, nil); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestLearningCurveFinalValues(t *testing.T) {
	c := LearningCurve{Seed: 1}.withDefaults()
	best := hptype.Params{"lr": 0.01, "weight_decay": 1e-4, "width": 0.6, "depth": int64(5)}
	if got, err := c.Final(best); err != nil || got != CurveOptimum {
		t.Errorf("Final at the optimum = %v, %v; want %v", got, err, CurveOptimum)
	}
	for _, p := range curveConfigs(t, 200) {
		final, err := c.Final(p)
		if err != nil {
			t.Fatal(err)
		}
		if final < CurveOptimum {
			t.Errorf("Final(%v) = %v, below the optimum", p, final)
		}
		if v, _ := c.Value(p, c.Max); v != final {
			t.Errorf("Value(%v, Max) = %v, want Final %v", p, v, final)
		}
		if v, _ := c.Value(p, 0); math.Abs(v-(final+1)) > c.Noise {
			t.Errorf("Value(%v, 0) = %v, want %v ± %v", p, v, final+1, c.Noise)
		}
	}
	if _, err := c.Value(best, c.Max+1); err == nil {
		t.Error("Value past Max: no error")
	}
	if _, err := c.Value(hptype.Params{"lr": 0.1}, 1); err == nil {
		t.Error("Value without weight_decay, width, depth: no error")
	}
}

func TestLearningCurveNoiseIsDeterministic(t *testing.T) {
	p := curveConfigs(t, 1)[0]
	a, _ := LearningCurve{Seed: 1}.Value(p, 9)
	b, _ := LearningCurve{Seed: 1}.Value(p, 9)
	c, _ := LearningCurve{Seed: 2}.Value(p, 9)
	if a != b {
		t.Errorf("seed 1 gave %v and then %v", a, b)
	}
	if a == c {
		t.Errorf("seeds 1 and 2 gave the same noisy value %v", a)
	}
}

func TestLearningCurvesCross(t *testing.T) {
	c := LearningCurve{Seed: 1}
	ps := curveConfigs(t, 40)
	crossings, pairs := 0, 0
	for i := range ps {
		for j := range i {
			ei, _ := c.Value(ps[i], 9)
			ej, _ := c.Value(ps[j], 9)
			fi, _ := c.Final(ps[i])
			fj, _ := c.Final(ps[j])
			pairs++
			if (ei < ej) != (fi < fj) {
				crossings++
			}
		}
	}
	t.Logf("%d of %d pairs of curves cross between epoch 9 and the end", crossings, pairs)
	// Early stopping must be neither trivial (no crossings) nor hopeless
	// (as many as chance).
	if crossings == 0 || crossings > pairs/3 {
		t.Errorf("%d of %d pairs cross, want some but fewer than a third", crossings, pairs)
	}
}

func TestCurveSpecSchedulers(t *testing.T) {
	c := LearningCurve{}
	for _, tc := range []struct {
		typ  spec.SchedulerType
		want spec.Scheduler
	}{
		{spec.ASHA, spec.Scheduler{Type: spec.ASHA, Resource: "epoch", Min: 9, Max: 81, ReductionFactor: 3}},
		{spec.Hyperband, spec.Scheduler{Type: spec.Hyperband, Resource: "epoch", Min: 9, Max: 81, ReductionFactor: 3, Brackets: 2}},
		{spec.Median, spec.Scheduler{Type: spec.Median, Resource: "epoch", Min: 9, Max: 81, Interval: 9, MinTrials: 5}},
	} {
		sp := c.Spec(CurveStudy{Scheduler: tc.typ, Seed: 1, Configs: 10, Workers: 2})
		if sp.Scheduler.Type != tc.want.Type || sp.Scheduler.Min != tc.want.Min || sp.Scheduler.Max != tc.want.Max ||
			sp.Scheduler.ReductionFactor != tc.want.ReductionFactor || sp.Scheduler.Brackets != tc.want.Brackets ||
			sp.Scheduler.Interval != tc.want.Interval || sp.Scheduler.MinTrials != tc.want.MinTrials {
			t.Errorf("%s: scheduler %+v, want %+v", tc.typ, sp.Scheduler, tc.want)
		}
	}
	sp := c.Spec(CurveStudy{Scheduler: spec.Hyperband, Configs: 10, Workers: 2, Min: 1})
	if sp.Scheduler.Brackets != 4 {
		t.Errorf("hyperband from 1 to 81: %d brackets, want 4 (first rungs 1, 3, 9, 27)", sp.Scheduler.Brackets)
	}
	if sp := c.Spec(CurveStudy{Configs: 10, Workers: 2}); sp.Scheduler.Type != spec.NoScheduler || sp.MaxTrials != 10 || sp.MaxConcurrency != 2 {
		t.Errorf("no scheduler: %+v", sp)
	}
}
