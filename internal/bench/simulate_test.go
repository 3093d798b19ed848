package bench

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/schedule"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// fakeScheduler has rungs at fixed resources and decides by a function of
// the trial; it records the calls it gets.
type fakeScheduler struct {
	rungs  []float64
	max    float64
	decide func(trials []*hptype.Trial, t *hptype.Trial) schedule.Decision
	calls  []decideCall
}

type decideCall struct {
	trial    int
	resource float64
	value    float64
	trials   int
}

func (f *fakeScheduler) Target(t *hptype.Trial) float64 {
	for _, r := range f.rungs {
		if r > t.Resource {
			return r
		}
	}
	return f.max
}

func (f *fakeScheduler) Decide(trials []*hptype.Trial, t *hptype.Trial, resource, value float64) schedule.Decision {
	f.calls = append(f.calls, decideCall{t.Number, resource, value, len(trials)})
	return f.decide(trials, t)
}

// stopOdd stops odd-numbered trials at their first rung.
func stopOdd(_ []*hptype.Trial, t *hptype.Trial) schedule.Decision {
	if t.Number%2 == 1 {
		return schedule.Decision{Action: hptype.RungStop, Reason: "odd"}
	}
	return schedule.Decision{Action: hptype.RungContinue}
}

func TestSimulateAccountsResource(t *testing.T) {
	c := LearningCurve{Seed: 5}
	sp := c.Spec(CurveStudy{Seed: 5, Configs: 9, Workers: 3})
	f := &fakeScheduler{rungs: []float64{10, 30}, max: 81, decide: stopOdd}
	res, err := Simulate(t.Context(), c, sp, f)
	if err != nil {
		t.Fatal(err)
	}
	// Trials 1, 3, 5, 7 stop at 10; 0, 2, 4, 6, 8 train to 81.
	if res.Completed != 5 || res.Pruned != 4 || len(res.Trials) != 9 {
		t.Errorf("%d completed, %d pruned of %d trials; want 5, 4 of 9", res.Completed, res.Pruned, len(res.Trials))
	}
	if want := 4*10 + 5*81.0; res.Resource != want {
		t.Errorf("resource %v, want %v", res.Resource, want)
	}
	if res.Makespan < res.Resource/3 || res.Makespan > res.Resource {
		t.Errorf("makespan %v with 3 workers and resource %v", res.Makespan, res.Resource)
	}
	best := math.Inf(1)
	seqs := map[int]bool{}
	for _, tr := range res.Trials {
		trained := 81.0
		wantState, wantRungs := hptype.TrialCompleted, []hptype.RungAction{hptype.RungContinue, hptype.RungContinue}
		if tr.Number%2 == 1 {
			trained, wantState, wantRungs = 10, hptype.TrialPruned, []hptype.RungAction{hptype.RungStop}
		}
		if tr.State != wantState || tr.Resource != trained {
			t.Errorf("trial %d: %s at %v, want %s at %v", tr.Number, tr.State, tr.Resource, wantState, trained)
		}
		var actions []hptype.RungAction
		for _, r := range tr.Rungs {
			actions = append(actions, r.Action)
			seqs[r.Seq] = true
		}
		if !reflect.DeepEqual(actions, wantRungs) {
			t.Errorf("trial %d: decisions %v, want %v", tr.Number, actions, wantRungs)
		}
		// One loss per epoch trained, in order, the last the value there.
		if len(tr.Metrics) != int(trained) || tr.Metrics[len(tr.Metrics)-1].Step != trained {
			t.Errorf("trial %d: %d metrics up to step %v, want %v", tr.Number, len(tr.Metrics), tr.Metrics[len(tr.Metrics)-1].Step, trained)
		}
		if tr.State == hptype.TrialCompleted {
			final, _ := c.Final(tr.Params)
			if *tr.Value != final || tr.Metrics[80].Value != final {
				t.Errorf("trial %d: value %v, final loss %v", tr.Number, *tr.Value, final)
			}
			best = min(best, final)
		}
	}
	if res.Best != best {
		t.Errorf("best %v, want %v", res.Best, best)
	}
	// Every decision has its own sequence number: 5 x 2 + 4.
	if len(seqs) != 14 || !seqs[1] || !seqs[14] {
		t.Errorf("sequence numbers %v, want 1 to 14", seqs)
	}
	if len(f.calls) != 14 {
		t.Errorf("%d decisions, want 14", len(f.calls))
	}
	for _, call := range f.calls {
		tr := res.Trials[call.trial]
		v, _ := c.Value(tr.Params, call.resource)
		if call.value != v || call.resource != 10 && call.resource != 30 {
			t.Errorf("decision for trial %d at %v with value %v, want a rung and value %v", call.trial, call.resource, call.value, v)
		}
	}
}

func TestSimulateOneWorkerRunsInOrder(t *testing.T) {
	c := LearningCurve{Seed: 1}
	sp := c.Spec(CurveStudy{Seed: 1, Configs: 4, Workers: 1})
	f := &fakeScheduler{rungs: []float64{10}, max: 81, decide: stopOdd}
	res, err := Simulate(t.Context(), c, sp, f)
	if err != nil {
		t.Fatal(err)
	}
	if res.Makespan != res.Resource || res.Resource != 2*81+2*10 {
		t.Errorf("one worker: makespan %v, resource %v; want both %v", res.Makespan, res.Resource, 2*81+2*10)
	}
	var order []int
	for _, call := range f.calls {
		order = append(order, call.trial)
	}
	if !reflect.DeepEqual(order, []int{0, 1, 2, 3}) {
		t.Errorf("decisions for trials %v, want 0, 1, 2, 3", order)
	}
}

func TestSimulateFullTraining(t *testing.T) {
	c := LearningCurve{Seed: 2}
	sp := c.Spec(CurveStudy{Seed: 2, Configs: 10, Workers: 4})
	res, err := Simulate(t.Context(), c, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 10 || res.Resource != 810 || res.Makespan != 3*81 {
		t.Errorf("full training: %d completed, resource %v, makespan %v; want 10, 810, 243", res.Completed, res.Resource, res.Makespan)
	}
	best := math.Inf(1)
	for _, tr := range res.Trials {
		final, _ := c.Final(tr.Params)
		best = min(best, final)
		if len(tr.Rungs) != 0 {
			t.Errorf("trial %d has decisions %v", tr.Number, tr.Rungs)
		}
	}
	if res.Best != best {
		t.Errorf("best %v, want %v", res.Best, best)
	}
}

func TestSimulateExploitCopiesTheDonor(t *testing.T) {
	c := LearningCurve{Seed: 3}
	sp := c.Spec(CurveStudy{Seed: 3, Configs: 3, Workers: 1})
	donorParams := hptype.Params{"lr": 0.01, "weight_decay": 1e-4, "width": 0.6, "depth": int64(5)}
	// Trial 0 trains to the end; trials 1 and 2 take its checkpoint at
	// their first rung, with the optimum's parameters. Trial 0's newest
	// checkpoint is at Max, which would leave them nothing to train, so
	// they get the one at its last rung (10), as the coordinator does, and
	// train from there to the end.
	f := &fakeScheduler{rungs: []float64{10}, max: 81, decide: func(_ []*hptype.Trial, t *hptype.Trial) schedule.Decision {
		if t.Number == 0 {
			return schedule.Decision{Action: hptype.RungContinue}
		}
		donor := 0
		return schedule.Decision{Action: hptype.RungExploit, Donor: &donor, Params: donorParams}
	}}
	res, err := Simulate(t.Context(), c, sp, f)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resource != 81+(10+71)+(10+71) {
		t.Errorf("resource %v, want 243: each exploiting trial trains 10 epochs, then 71 from the copy", res.Resource)
	}
	if res.Completed != 3 || res.Best != CurveOptimum {
		t.Errorf("%d completed, best %v; want 3 and the optimum %v", res.Completed, res.Best, CurveOptimum)
	}
	tr := res.Trials[1]
	if len(tr.Rungs) != 1 || tr.Rungs[0].Donor == nil || *tr.Rungs[0].Donor != 0 || !reflect.DeepEqual(tr.Rungs[0].DonorParams, res.Trials[0].Params) || tr.Rungs[0].ParamsBefore == nil {
		t.Errorf("trial 1's exploit is not recorded with its lineage: %+v", tr.Rungs)
	}
	if !reflect.DeepEqual(tr.Params, donorParams) || tr.Rungs[0].Checkpoint == "" || tr.Metrics[len(tr.Metrics)-1].Step != 81 {
		t.Errorf("trial 1 has parameters %v, copy %q and last metric %+v; want the decision's, a copy, and training to 81", tr.Params, tr.Rungs[0].Checkpoint, tr.Metrics[len(tr.Metrics)-1])
	}
}

func TestSimulateRejectsBadSchedulers(t *testing.T) {
	c := LearningCurve{}
	sp := c.Spec(CurveStudy{Seed: 1, Configs: 2, Workers: 1})
	for _, tc := range []struct {
		name string
		f    *fakeScheduler
		want string
	}{
		{"target not above", &fakeScheduler{rungs: nil, max: 0, decide: stopOdd}, "not above"},
		{"exploit without donor", &fakeScheduler{rungs: []float64{10}, max: 81, decide: func([]*hptype.Trial, *hptype.Trial) schedule.Decision {
			return schedule.Decision{Action: hptype.RungExploit}
		}}, "without a donor"},
		{"unknown action", &fakeScheduler{rungs: []float64{10}, max: 81, decide: func([]*hptype.Trial, *hptype.Trial) schedule.Decision {
			return schedule.Decision{Action: "pause"}
		}}, "unknown scheduler action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Simulate(t.Context(), c, sp, tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestSimulateIsDeterministic(t *testing.T) {
	c := LearningCurve{Seed: 9}
	sp := c.Spec(CurveStudy{Seed: 9, Configs: 20, Workers: 4})
	run := func() *SimResult {
		f := &fakeScheduler{rungs: []float64{3, 9, 27}, max: 81, decide: func(trials []*hptype.Trial, t *hptype.Trial) schedule.Decision {
			// Stop a trial worse than the trial before it at the rung.
			if v := t.Metrics[len(t.Metrics)-1].Value; t.Number > 0 && len(trials[t.Number-1].Metrics) >= len(t.Metrics) && trials[t.Number-1].Metrics[len(t.Metrics)-1].Value < v {
				return schedule.Decision{Action: hptype.RungStop}
			}
			return schedule.Decision{Action: hptype.RungContinue}
		}}
		res, err := Simulate(t.Context(), c, sp, f)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Error("two simulations of the same study differ")
	}
	if a.Pruned == 0 || a.Completed == 0 {
		t.Errorf("%d pruned, %d completed: want some of each", a.Pruned, a.Completed)
	}
}

func TestRunSchedulersSummarises(t *testing.T) {
	cfg := SchedulerConfig{
		Schedulers: []spec.SchedulerType{spec.ASHA},
		New: func(*spec.Spec) (schedule.Scheduler, error) {
			return &fakeScheduler{rungs: []float64{10}, max: 81, decide: stopOdd}, nil
		},
		Configs: 9, Workers: 3, Seeds: 4, Parallel: 1,
	}
	a, err := RunSchedulers(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Parallel = 4
	b, err := RunSchedulers(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("one seed at a time gave\n%+v\nfour at a time\n%+v", a, b)
	}
	if len(a) != 2 || a[0].Scheduler != FullTraining || a[1].Scheduler != "asha" {
		t.Fatalf("results %+v, want full training then asha", a)
	}
	full, fake := a[0], a[1]
	if full.Resource != (Summary{Median: 1, Q1: 1, Q3: 1, N: 4}) || full.Gap.Median != 0 || full.Within != 4 {
		t.Errorf("full training: %+v", full)
	}
	// Odd trials (4 of 9) stop at 10 of 81.
	want := (4*10 + 5*81.0) / (9 * 81)
	if fake.Resource.Median != want || fake.Resource.Q1 != want || fake.Completed.Median != 5 || fake.Pruned.Median != 4 {
		t.Errorf("fake: %+v, want resource %v, 5 completed, 4 pruned", fake, want)
	}
	if fake.Gap.Q1 < 0 || fake.Regret.Q1 < full.Regret.Q1 {
		t.Errorf("the fake, training a subset of the same configurations, did better than full training: %+v vs %+v", fake, full)
	}
}

func TestRunSchedulersNeedsAScheduler(t *testing.T) {
	_, err := RunSchedulers(t.Context(), SchedulerConfig{
		Schedulers: []spec.SchedulerType{spec.ASHA},
		New:        func(*spec.Spec) (schedule.Scheduler, error) { return nil, nil },
		Configs:    3, Workers: 1, Seeds: 1,
	})
	if err == nil || !strings.Contains(err.Error(), "not implemented") {
		t.Errorf("error %v, want one saying the scheduler is not implemented", err)
	}
}
