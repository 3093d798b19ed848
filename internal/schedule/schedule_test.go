package schedule_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/schedule"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// arrival is a trial reaching a rung with a value: one step of a recorded
// study that the harness plays through a scheduler.
type arrival struct {
	trial    int
	resource float64
	value    float64
}

// harness plays arrivals through a scheduler as the coordinator does: it
// decides, records the decision on the trial and moves the trial on. It
// checks on every step that Decide is pure: it leaves the trials as they
// were and decides the same when asked again.
type harness struct {
	t      *testing.T
	sched  schedule.Scheduler
	trials []*hptype.Trial
	now    time.Time
}

func newHarness(t *testing.T, sp *spec.Spec, n int) *harness {
	t.Helper()
	s, err := schedule.New(sp)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, sched: s, now: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}
	for i := range n {
		h.trials = append(h.trials, &hptype.Trial{Number: i, State: hptype.TrialRunning, Params: hptype.Params{"lr": 0.1 * float64(i+1), "n": int64(i%4 + 1)},
			Checkpoint: &hptype.CheckpointRef{ID: fmt.Sprintf("%06d.001.0000", i)}})
	}
	return h
}

func snapshot(t *testing.T, trials []*hptype.Trial) string {
	t.Helper()
	b, err := json.Marshal(trials)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// play decides each arrival and returns the decisions as
// "trial@resource action" strings.
func (h *harness) play(arrivals ...arrival) []string {
	h.t.Helper()
	var out []string
	for _, a := range arrivals {
		tr := h.trials[a.trial]
		if tr.State.Finished() {
			h.t.Fatalf("trial %d arrives at %g after it was stopped", a.trial, a.resource)
		}
		if got := h.sched.Target(tr); got != a.resource {
			h.t.Fatalf("trial %d at %g has target %g, but arrives at %g", a.trial, tr.Resource, got, a.resource)
		}
		before := snapshot(h.t, h.trials)
		d := h.sched.Decide(h.trials, tr, a.resource, a.value)
		if after := snapshot(h.t, h.trials); after != before {
			h.t.Fatalf("Decide changed the trials")
		}
		if again := h.sched.Decide(h.trials, tr, a.resource, a.value); !reflect.DeepEqual(again, d) {
			h.t.Fatalf("Decide is not deterministic: %+v then %+v", d, again)
		}
		r := schedule.Record(h.trials, tr, a.resource, a.value, d, h.now)
		tr.Resource = a.resource
		switch d.Action {
		case hptype.RungStop:
			tr.State = hptype.TrialPruned
		case hptype.RungExploit:
			tr.Params = d.Params
		}
		s := fmt.Sprintf("%d@%g %s", a.trial, a.resource, d.Action)
		if r.Donor != nil {
			s += fmt.Sprintf(" %d", *r.Donor)
		}
		out = append(out, s)
	}
	return out
}

func schedSpec(t *testing.T, goal, section string, params ...string) *spec.Spec {
	t.Helper()
	if len(params) == 0 {
		params = []string{"  lr: {type: float, min: 0.001, max: 1}", "  n: {type: int, min: 1, max: 8}"}
	}
	src := "name: s\nobjective: {metric: loss, goal: " + goal + "}\nparameters:\n" + strings.Join(params, "\n") +
		"\ntrainer: {builtin: digits-mlp}\nsampler: {seed: 11}\nmax_trials: 10\nscheduler: " + section + "\n"
	sp, err := spec.Decode("space.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestASHA(t *testing.T) {
	for _, tc := range []struct {
		name     string
		goal     string
		arrivals []arrival
		want     []string
	}{
		{
			name: "minimize: the best 1/3 of each rung so far go on",
			goal: "minimize",
			arrivals: []arrival{
				{0, 1, 0.5},  // alone: goes on
				{1, 1, 0.7},  // 2nd of 2, keep 1
				{2, 1, 0.3},  // 1st of 3, keep 1
				{3, 1, 0.4},  // 2nd of 4, keep 1
				{4, 1, 0.1},  // 1st of 5
				{5, 1, 0.35}, // 3rd of 6, keep 2
				{6, 1, 0.2},  // 2nd of 7, keep 2
				{0, 3, 0.45}, // alone at rung 1
				{2, 3, 0.25},
				{4, 3, 0.6}, // 3rd of 3, keep 1
			},
			want: []string{"0@1 continue", "1@1 stop", "2@1 continue", "3@1 stop", "4@1 continue", "5@1 stop", "6@1 continue",
				"0@3 continue", "2@3 continue", "4@3 stop"},
		},
		{
			name:     "maximize flips the ranking",
			goal:     "maximize",
			arrivals: []arrival{{0, 1, 0.5}, {1, 1, 0.7}, {2, 1, 0.3}, {3, 1, 0.9}},
			want:     []string{"0@1 continue", "1@1 continue", "2@1 stop", "3@1 continue"},
		},
		{
			name:     "ties go on; NaN stops",
			goal:     "minimize",
			arrivals: []arrival{{0, 1, 0.5}, {1, 1, 0.5}, {2, 1, math.NaN()}},
			want:     []string{"0@1 continue", "1@1 continue", "2@1 stop"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, schedSpec(t, tc.goal, "{type: asha, min: 1, max: 9}"), 8)
			if got := h.play(tc.arrivals...); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decisions\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestTargets(t *testing.T) {
	for _, tc := range []struct {
		section string
		trial   int
		from    []float64
		want    []float64
	}{
		{"{type: asha, min: 1, max: 27}", 0, []float64{0, 0.5, 1, 2, 3, 9, 20}, []float64{1, 1, 3, 3, 9, 27, 27}},
		{"{type: asha, min: 2, max: 20, reduction_factor: 2}", 0, []float64{0, 2, 4, 8, 16}, []float64{2, 4, 8, 16, 20}},
		// Bracket s starts at min*eta^s; trial n is in bracket n mod 3.
		{"{type: hyperband, min: 1, max: 9}", 1, []float64{0, 3}, []float64{3, 9}},
		{"{type: hyperband, min: 1, max: 9}", 2, []float64{0}, []float64{9}},
		{"{type: hyperband, min: 1, max: 9}", 3, []float64{0, 1}, []float64{1, 3}},
		{"{type: median, min: 2, max: 10, interval: 3}", 0, []float64{0, 2, 5, 8}, []float64{2, 5, 8, 10}},
		{"{type: pbt, min: 4, max: 12}", 0, []float64{0, 4, 8, 9}, []float64{4, 8, 12, 12}},
	} {
		s, err := schedule.New(schedSpec(t, "minimize", tc.section))
		if err != nil {
			t.Fatal(err)
		}
		// The trial was judged at every rung it reached on the way.
		tr := &hptype.Trial{Number: tc.trial}
		reached := -1.0
		for i, from := range tc.from {
			tr.Resource = from
			if reached >= 0 && from >= reached {
				tr.Rungs = append(tr.Rungs, hptype.RungDecision{Rung: len(tr.Rungs), Resource: reached, Action: hptype.RungContinue})
			}
			got := s.Target(tr)
			if got != tc.want[i] {
				t.Errorf("%s trial %d: Target from %g = %g, want %g", tc.section, tc.trial, from, got, tc.want[i])
			}
			reached = got
		}
	}
}

// TestTargetOnAnUnjudgedRung sends a trial whose segment stopped exactly at
// a rung without being judged (suspended at a deadline, or interrupted) to
// that rung again, so the rung is not skipped; after an exploit, which puts
// the trial on the donor's resource, it goes to the rung above.
func TestTargetOnAnUnjudgedRung(t *testing.T) {
	s, err := schedule.New(schedSpec(t, "minimize", "{type: asha, min: 1, max: 9}"))
	if err != nil {
		t.Fatal(err)
	}
	judged := []hptype.RungDecision{{Rung: 0, Resource: 1, Action: hptype.RungContinue}}
	exploited := []hptype.RungDecision{{Rung: 0, Resource: 1, Action: hptype.RungExploit, Checkpoint: "000001.002.9999"}}
	for _, tc := range []struct {
		resource   float64
		rungs      []hptype.RungDecision
		checkpoint string
		want       float64
	}{
		{1, nil, "", 1},
		{1, judged, "", 3},
		{3, judged, "", 3},
		// On the copy of the donor's checkpoint at 3: on to 9.
		{3, exploited, "000001.002.9999", 9},
		// Its own segment since stopped at 3, unjudged: judged there.
		{3, exploited, "000002.003.0004", 3},
	} {
		tr := &hptype.Trial{Resource: tc.resource, Rungs: tc.rungs}
		if tc.checkpoint != "" {
			tr.Checkpoint = &hptype.CheckpointRef{ID: tc.checkpoint}
		}
		if got := s.Target(tr); got != tc.want {
			t.Errorf("Target at %g with decisions %+v = %g, want %g", tc.resource, tc.rungs, got, tc.want)
		}
	}
}

// TestHyperbandBrackets judges each trial only against its bracket.
func TestHyperbandBrackets(t *testing.T) {
	h := newHarness(t, schedSpec(t, "minimize", "{type: hyperband, min: 1, max: 9, brackets: 2}"), 6)
	got := h.play(
		arrival{0, 1, 0.5}, arrival{2, 1, 0.9}, // bracket 0
		arrival{1, 3, 0.95}, arrival{3, 3, 0.1}, // bracket 1: its first rung is 3
		arrival{5, 3, 0.2},
	)
	want := []string{"0@1 continue", "2@1 stop", "1@3 continue", "3@3 continue", "5@3 stop"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decisions\n got %q\nwant %q", got, want)
	}
	if b := h.trials[3].Rungs[0].Bracket; b != 1 {
		t.Errorf("trial 3 recorded in bracket %d, want 1", b)
	}
}

func TestMedianStopping(t *testing.T) {
	h := newHarness(t, schedSpec(t, "minimize", "{type: median, min: 1, max: 4, interval: 1, min_trials: 3}"), 6)
	got := h.play(
		arrival{0, 1, 0.5}, arrival{1, 1, 0.6}, arrival{2, 1, 0.7}, // too few others: go on
		arrival{3, 1, 0.65}, // others' median 0.6: worse, stops
		arrival{4, 1, 0.55}, // others 0.5 0.6 0.65 0.7: median 0.625, better
		arrival{0, 2, 0.9},  // best so far 0.5: too few others at rung 1
		arrival{1, 2, 0.3}, arrival{4, 2, 0.8},
		arrival{2, 2, 0.68}, // best so far 0.68 against others' bests 0.5 0.3 0.55: median 0.5
	)
	want := []string{"0@1 continue", "1@1 continue", "2@1 continue", "3@1 stop", "4@1 continue",
		"0@2 continue", "1@2 continue", "4@2 continue", "2@2 stop"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decisions\n got %q\nwant %q", got, want)
	}
}

func TestPBTExploits(t *testing.T) {
	sp := schedSpec(t, "minimize", "{type: pbt, min: 2, max: 10, quantile: 0.25, perturbation_factors: [0.5, 2], explore: [lr, n]}")
	h := newHarness(t, sp, 8)
	h.trials[6].Checkpoint = nil // cannot donate
	got := h.play(
		arrival{0, 2, 0.5}, arrival{1, 2, 0.4}, arrival{2, 2, 0.3}, // 3 trials: a quarter is none
		arrival{3, 2, 0.9}, // 4 trials: bottom 1 is trial 3 itself; top 1 is trial 2
		arrival{4, 2, 0.35}, arrival{5, 2, 0.6}, arrival{6, 2, 0.1},
		arrival{7, 2, 0.8}, // 8 trials: bottom 2 holds trial 7; top 2 are 6 (no checkpoint) and 2
	)
	want := []string{"0@2 continue", "1@2 continue", "2@2 continue", "3@2 exploit 2", "4@2 continue", "5@2 continue", "6@2 continue", "7@2 exploit 2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions\n got %q\nwant %q", got, want)
	}
	r := h.trials[3].Rungs[0]
	if r.ParamsBefore["lr"] != 0.4 || r.DonorParams["lr"] != 0.30000000000000004 {
		t.Errorf("lineage of trial 3: before %v, donor %v", r.ParamsBefore, r.DonorParams)
	}
	for _, n := range []int{3, 7} {
		p := h.trials[n].Params
		lr, _ := p.Float("lr")
		units, _ := p.Int("n")
		donorLR, _ := h.trials[2].Params.Float("lr")
		if r := lr / donorLR; math.Abs(r-0.5) > 1e-12 && math.Abs(r-2) > 1e-12 {
			t.Errorf("trial %d: lr %g is not the donor's %g times 0.5 or 2", n, lr, donorLR)
		}
		if units != 2 && units != 6 {
			t.Errorf("trial %d: n = %d, want the donor's 3 times 0.5 or 2, rounded and clipped to [1, 8]", n, units)
		}
	}
}

// TestPBTClipsToTheRange perturbs a parameter at its bounds.
func TestPBTClipsToTheRange(t *testing.T) {
	sp := schedSpec(t, "maximize", "{type: pbt, min: 1, max: 3, quantile: 0.5, perturbation_factors: [4]}",
		"  lr: {type: float, min: 0.1, max: 0.5}")
	h := newHarness(t, sp, 2)
	h.trials[0].Params = hptype.Params{"lr": 0.3}
	got := h.play(arrival{0, 1, 0.9}, arrival{1, 1, 0.1})
	if got[1] != "1@1 exploit 0" || h.trials[1].Params["lr"] != 0.5 {
		t.Errorf("decisions %q, trial 1 lr %v; want an exploit of trial 0 with lr clipped to 0.5", got, h.trials[1].Params["lr"])
	}
}

// TestReplayMakesTheSameDecisions replays a recorded study from every
// point, as a coordinator restarted there does: with the decisions recorded
// before it, every scheduler decides each later arrival the same way.
func TestReplayMakesTheSameDecisions(t *testing.T) {
	for section, act := range map[string]hptype.RungAction{
		"{type: asha, min: 1, max: 27}":                               hptype.RungStop,
		"{type: hyperband, min: 1, max: 27}":                          hptype.RungStop,
		"{type: median, min: 1, max: 27, interval: 2, min_trials: 2}": hptype.RungStop,
		"{type: pbt, min: 1, max: 27, interval: 2}":                   hptype.RungExploit,
	} {
		sp := schedSpec(t, "minimize", section)
		s, err := schedule.New(sp)
		if err != nil {
			t.Fatal(err)
		}
		const n = 12
		curve := func(trial int, r float64) float64 {
			return 1/(1+r*float64(trial%5+1)/10) + 0.01*float64(trial)
		}
		// Play the study: trials take turns reaching their next target.
		full := newHarness(t, sp, n)
		var arrivals []arrival
		for round := 0; round < 20; round++ {
			for _, tr := range full.trials {
				if tr.State.Finished() {
					continue
				}
				target := s.Target(tr)
				if target >= sp.Scheduler.Max {
					tr.State = hptype.TrialCompleted
					continue
				}
				a := arrival{tr.Number, target, curve(tr.Number, target)}
				arrivals = append(arrivals, a)
				full.play(a)
			}
		}
		acted := 0
		for _, tr := range full.trials {
			for _, r := range tr.Rungs {
				if r.Action == act {
					acted++
				}
			}
		}
		if len(arrivals) <= n || acted == 0 {
			t.Fatalf("%s: %d arrivals, %d decisions to %s; the replay should cover more", section, len(arrivals), acted, act)
		}
		// From each point k, rebuild the state from the recorded decisions
		// before k and decide arrival k again.
		for k, a := range arrivals {
			seq := k + 1
			trials := make([]*hptype.Trial, n)
			for i, tr := range full.trials {
				cp := *tr
				cp.Rungs = nil
				for _, r := range tr.Rungs {
					if r.Seq < seq {
						cp.Rungs = append(cp.Rungs, r)
					}
				}
				trials[i] = &cp
			}
			var want hptype.RungDecision
			for _, r := range full.trials[a.trial].Rungs {
				if r.Seq == seq {
					want = r
				}
			}
			d := s.Decide(trials, trials[a.trial], a.resource, a.value)
			if d.Action != want.Action || d.Reason != want.Reason || (d.Donor == nil) != (want.Donor == nil) {
				t.Fatalf("%s: replaying decision %d (trial %d at %g): %s (%s), recorded %s (%s)", section, seq, a.trial, a.resource, d.Action, d.Reason, want.Action, want.Reason)
			}
		}
	}
}
