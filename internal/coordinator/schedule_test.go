package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// curve is the validation loss of a trial with learning rate lr after
// resource epochs: it falls with training, and lr near 0.05 is best.
func curve(lr, resource float64) float64 {
	return math.Abs(math.Log(lr/0.05)) + 2/(1+resource)
}

// state is what the curve trainer checkpoints.
type state struct {
	Trial    int     `json:"trial"`
	Resource float64 `json:"resource"`
}

// curveTrainer trains along curve from the resource of the checkpoint it
// restores up to the segment's target (9 when none), reports a metric per
// epoch and checkpoints at the end, like the built-in workload. It records
// which trial's state each segment restored.
type curveTrainer struct {
	ckpts *checkpoint.Store
	mu    sync.Mutex
	// restored[trial][segment] is the trial whose checkpoint the segment
	// started from (-1 for none).
	restored map[int]map[int]int
	// stop, when set, is called with each request before it runs.
	stop func(hptype.SegmentRequest)
}

func (c *curveTrainer) run(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
	if c.stop != nil {
		c.stop(req)
		if ctx.Err() != nil {
			return hptype.SegmentResult{}, ctx.Err()
		}
	}
	lr, err := req.Params.Float("lr")
	if err != nil {
		return hptype.SegmentResult{}, err
	}
	from, origin := 0.0, -1
	var mem checkpoint.Memory
	if m, _, err := c.ckpts.Latest(ctx, req.Checkpoint.Prefix, &mem); err == nil {
		var st state
		b, _ := mem.Bytes("state")
		if err := json.Unmarshal(b, &st); err != nil {
			return hptype.SegmentResult{}, err
		}
		from, origin = m.Resource, st.Trial
	}
	c.mu.Lock()
	if c.restored[req.Trial] == nil {
		c.restored[req.Trial] = map[int]int{}
	}
	c.restored[req.Trial][req.Segment] = origin
	c.mu.Unlock()
	to := req.Resource.To
	if to == 0 {
		to = 9
	}
	res := hptype.SegmentResult{
		APIVersion: hptype.APIVersion, Study: req.Study, Trial: req.Trial, Attempt: req.Attempt,
		Status: hptype.SegmentCompleted, ResourceReached: to,
		Usage: hptype.Usage{WallMS: 100, BilledMS: 100},
	}
	for r := from + 1; r <= to; r++ {
		res.Metrics = append(res.Metrics, hptype.Metric{Step: r, Name: "val_loss", Value: curve(lr, r)})
	}
	b, _ := json.Marshal(state{Trial: req.Trial, Resource: to})
	m, err := c.ckpts.Save(ctx, req.Checkpoint.Prefix, checkpoint.Manifest{Study: req.Study, Trial: req.Trial,
		ID: checkpoint.ID{Segment: req.Segment, Attempt: req.Attempt}, Resource: to}, []checkpoint.Shard{checkpoint.BytesShard("state", b)})
	if err != nil {
		return hptype.SegmentResult{}, err
	}
	res.Checkpoint = m.Ref()
	return res, nil
}

func scheduledSetup(t *testing.T) (*bundle, *curveTrainer) {
	b := setup(t, nil)
	ct := &curveTrainer{ckpts: b.ckpts, restored: map[int]map[int]int{}}
	b.exec.fn = ct.run
	return b, ct
}

// decisions lists a study's rung decisions in the order they were made.
func decisions(trials []*hptype.Trial) []string {
	var all []hptype.RungDecision
	trialOf := map[int]int{}
	for _, tr := range trials {
		for _, r := range tr.Rungs {
			all = append(all, r)
			trialOf[r.Seq] = tr.Number
		}
	}
	slices.SortFunc(all, func(a, b hptype.RungDecision) int { return a.Seq - b.Seq })
	out := make([]string, len(all))
	for i, r := range all {
		out[i] = fmt.Sprintf("#%d trial %d at %g: %s", r.Seq, trialOf[r.Seq], r.Resource, r.Action)
	}
	return out
}

func TestASHAPrunesAndPromotesFromCheckpoints(t *testing.T) {
	b, ct := scheduledSetup(t)
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 12, 3)+"scheduler: {type: asha, min: 1, max: 9}\n")
	res, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Progress
	if res.Study.State != hptype.StudyCompleted || p.Pruned == 0 || p.Completed == 0 || p.Pruned+p.Completed != 12 {
		t.Fatalf("state %s; %d pruned, %d completed of 12", res.Study.State, p.Pruned, p.Completed)
	}
	// Every segment trains from where the last one stopped up to a rung
	// (1, 3) or to max (9), and starts from the trial's own checkpoint.
	var trained float64
	for _, req := range b.exec.reqs {
		if !slices.Contains([]float64{1, 3, 9}, req.Resource.To) {
			t.Errorf("trial %d segment %d asked to train to %g, not a rung or max", req.Trial, req.Segment, req.Resource.To)
		}
		trained += req.Resource.To - req.Resource.From
		want := req.Trial
		if req.Segment == 0 {
			want = -1
		}
		if got := ct.restored[req.Trial][req.Segment]; got != want {
			t.Errorf("trial %d segment %d restored trial %d's checkpoint, want %d", req.Trial, req.Segment, got, want)
		}
	}
	if p.ResourceTrained != trained || trained >= 12*9*0.75 {
		t.Errorf("resource trained %g (requests: %g); full training is %d", p.ResourceTrained, trained, 12*9)
	}
	seqs := map[int]bool{}
	for _, tr := range res.Trials {
		for i, r := range tr.Rungs {
			if seqs[r.Seq] {
				t.Errorf("decision sequence number %d used twice", r.Seq)
			}
			seqs[r.Seq] = true
			if r.Value != curve(tr.Params["lr"].(float64), r.Resource) {
				t.Errorf("trial %d rung %d: value %g is not the objective at %g", tr.Number, i, r.Value, r.Resource)
			}
		}
		last := tr.Rungs[len(tr.Rungs)-1]
		switch tr.State {
		case hptype.TrialCompleted:
			if len(tr.Rungs) != 2 || last.Action != hptype.RungContinue || tr.Resource != 9 {
				t.Errorf("completed trial %d: rungs %+v, resource %g", tr.Number, tr.Rungs, tr.Resource)
			}
		case hptype.TrialPruned:
			if last.Action != hptype.RungStop || tr.Value != nil {
				t.Errorf("pruned trial %d: last rung %+v, value %v", tr.Number, last, tr.Value)
			}
		}
	}
	if best := p.Best; best == nil || best.State != hptype.TrialCompleted {
		t.Errorf("best trial %+v, want a completed one", best)
	}
}

// TestASHADecisionsSurviveAStop stops an ASHA study in the middle and
// resumes it: the rung decisions are those of an uninterrupted run.
func TestASHADecisionsSurviveAStop(t *testing.T) {
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 12, 1)+"scheduler: {type: asha, min: 1, max: 9}\n")
	b, _ := scheduledSetup(t)
	ref, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	want := decisions(ref.Trials)

	for _, stopAt := range []int{3, 8, 14} {
		b, ct := scheduledSetup(t)
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		ct.stop = func(hptype.SegmentRequest) {
			if n++; n == stopAt {
				cancel()
			}
		}
		res, err := coordinator.Run(ctx, b.config(sp))
		if err != nil {
			t.Fatal(err)
		}
		if res.Study.State != hptype.StudyStopped {
			t.Fatalf("stop at segment %d: study %s", stopAt, res.Study.State)
		}
		before := len(decisions(res.Trials))
		ct.stop = nil
		res, err = coordinator.Run(context.Background(), b.config(sp))
		if err != nil {
			t.Fatal(err)
		}
		if got := decisions(res.Trials); !slices.Equal(got, want) {
			t.Errorf("stopped at segment %d after %d decisions; decisions differ from an uninterrupted run:\n got %q\nwant %q", stopAt, before, got, want)
		}
	}
}

// TestPBTContinuesFromTheDonorsCheckpoint checks that an exploit hands the
// donor's newest checkpoint and perturbed parameters to the trial's next
// segment, and records the lineage.
func TestPBTContinuesFromTheDonorsCheckpoint(t *testing.T) {
	for _, concurrency := range []int{4, 2} {
		t.Run(fmt.Sprint(concurrency), func(t *testing.T) { testPBT(t, concurrency) })
	}
}

// testPBT runs the PBT study with concurrency trials at once. With 2, the
// first trials finish while later ones exploit them: a finished donor's
// final checkpoint must not be copied, or the trial would end with no value
// of its own.
func testPBT(t *testing.T, concurrency int) {
	b, ct := scheduledSetup(t)
	// Each trial of the grid is worse than the one before, so the trials
	// that start once the first four have reached a rung are in the bottom
	// quarter there, whatever the order of arrivals.
	sp := mustSpec(t, `name: pbt
objective: {metric: val_loss, goal: minimize}
parameters:
  lr: {type: float, min: 0.001, max: 1, points: [0.05, 0.06, 0.08, 0.1, 0.2, 0.4, 0.7, 1.0]}
trainer: {builtin: digits-mlp, timeout: 1m}
sampler: {type: grid}
max_trials: 8
max_concurrency: 4
scheduler: {type: pbt, min: 3, max: 9, quantile: 0.25}
`)
	sp.MaxConcurrency = concurrency
	res, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.Completed != 8 || res.Progress.Pruned != 0 {
		t.Fatalf("%+v; PBT completes every trial", res.Progress)
	}
	exploits := 0
	for _, tr := range res.Trials {
		lr, _ := tr.Params.Float("lr")
		if tr.Value == nil || *tr.Value != curve(lr, 9) {
			t.Errorf("trial %d ended with value %v; its parameters (lr %g) reach %g at the end", tr.Number, tr.Value, lr, curve(lr, 9))
		}
		// The i-th rung decision follows the i-th attempt that completed at
		// a rung; the segment after that attempt is the decision's.
		var after []int
		for _, a := range tr.Attempts {
			if a.Status == "completed" && a.ResourceTo < 9 {
				after = append(after, a.Segment+1)
			}
		}
		if len(after) != len(tr.Rungs) {
			t.Fatalf("trial %d: %d attempts ended at a rung, %d rung decisions\n%+v\n%+v", tr.Number, len(after), len(tr.Rungs), tr.Attempts, tr.Rungs)
		}
		for i, r := range tr.Rungs {
			segment := after[i]
			if r.Action != hptype.RungExploit {
				continue
			}
			exploits++
			if got := ct.restored[tr.Number][segment]; got != *r.Donor {
				t.Errorf("trial %d exploited trial %d at %g, but its segment %d restored trial %d's checkpoint", tr.Number, *r.Donor, r.Resource, segment, got)
			}
			var req *hptype.SegmentRequest
			for i := range b.exec.reqs {
				if q := &b.exec.reqs[i]; q.Trial == tr.Number && q.Segment == segment {
					req = q
				}
			}
			if req == nil || req.Params["lr"] == r.DonorParams["lr"] || r.ParamsBefore == nil {
				t.Errorf("trial %d after its exploit of %d: request %+v; lineage %+v", tr.Number, *r.Donor, req, r)
				continue
			}
			lr, _ := req.Params.Float("lr")
			donorLR, _ := r.DonorParams.Float("lr")
			if f := lr / donorLR; math.Abs(f-0.8) > 1e-9 && math.Abs(f-1.2) > 1e-9 && lr != 0.001 && lr != 1 {
				t.Errorf("trial %d: lr %g is not the donor's %g perturbed by 0.8 or 1.2", tr.Number, lr, donorLR)
			}
		}
	}
	if exploits == 0 {
		t.Fatalf("no exploit happened: %q", decisions(res.Trials))
	}
}

// TestPlacementRoutesTrials runs a study whose declared model size sends
// some trials to the pool: each segment runs on the executor its trial's
// placement names, pool attempts are priced by the hour, and the progress
// reports the workers' idle time from their ledgers.
func TestPlacementRoutesTrials(t *testing.T) {
	b := setup(t, succeed)
	pool := &recorder{fn: succeed}
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 8, 3)+"resources: {model_params: units * 3e7}\npool: {name: gpu, price_per_hour: 3.6}\n")
	cfg := b.config(sp)
	cfg.Pool = pool
	reads := 0
	cfg.PoolUsage = func(context.Context) ([]hptype.WorkerUsage, error) {
		// When the run begins, w1 has run before (for another study) and
		// w2 has nothing to add; later w1 has been busy 30 s and idle 10 s
		// more. The worker's own price is not the one the study is billed
		// at.
		reads++
		if reads == 1 {
			return []hptype.WorkerUsage{{ID: "w1", PricePerHour: 99, BusySeconds: 500, IdleSeconds: 7200}, {ID: "w2", IdleSeconds: 60}}, nil
		}
		return []hptype.WorkerUsage{{ID: "w1", PricePerHour: 99, BusySeconds: 530, IdleSeconds: 7210}, {ID: "w2", IdleSeconds: 60}}, nil
	}
	res, err := coordinator.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	onPool := 0
	for _, tr := range res.Trials {
		units, _ := tr.Params.Int("units")
		big := units > 33
		if tr.Placement == nil || (tr.Placement.Pool == "gpu") != big {
			t.Errorf("trial %d (units %d) placed %+v", tr.Number, units, tr.Placement)
		}
		ran := map[bool]*recorder{true: pool, false: b.exec}[big]
		if ran.runs()[tr.Number] != 1 || map[bool]*recorder{true: b.exec, false: pool}[big].runs()[tr.Number] != 0 {
			t.Errorf("trial %d (units %d) did not run once on its placement's executor", tr.Number, units)
		}
		want := 0.001*2 + 0.01 // 1 s at 2 GB and $0.001/GB-s, plus the request
		if big {
			onPool++
			want = 1.0 / 3600 * 3.6
		}
		if got := tr.CostUSD(); math.Abs(got-want) > 1e-12 {
			t.Errorf("trial %d costs $%g, want $%g", tr.Number, got, want)
		}
	}
	p := res.Progress.Pool
	if onPool == 0 || onPool == 8 || p == nil || p.Trials != onPool || p.Workers != 1 || p.Utilisation != 0.75 || math.Abs(p.IdleCostUSD-0.01) > 1e-12 {
		t.Errorf("%d trials on the pool; pool progress %+v", onPool, p)
	}
}

// TestARungReachedAtADeadlineIsJudged suspends segments exactly at their
// rung, as a trainer stopped by its deadline just after the rung's epoch
// does: the trial is judged there all the same (through a segment with
// nothing left to train), and the decisions are those of a study whose
// segments reach their rungs in one go.
func TestARungReachedAtADeadlineIsJudged(t *testing.T) {
	sp := mustSpec(t, fmt.Sprintf(baseSpec, 9, 1)+"scheduler: {type: asha, min: 1, max: 9}\n")
	b, _ := scheduledSetup(t)
	ref, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}

	b, ct := scheduledSetup(t)
	plain := b.exec.fn
	b.exec.fn = func(ctx context.Context, req hptype.SegmentRequest) (hptype.SegmentResult, error) {
		res, err := plain(ctx, req)
		if err == nil && req.Resource.To < 9 && req.Resource.From < req.Resource.To {
			res.Status = hptype.SegmentSuspended
		}
		return res, err
	}
	res, err := coordinator.Run(context.Background(), b.config(sp))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decisions(res.Trials), decisions(ref.Trials); !slices.Equal(got, want) {
		t.Errorf("decisions with segments suspended at their rungs:\n got %q\nwant %q", got, want)
	}
	zero := 0
	for _, req := range b.exec.reqs {
		if req.Resource.From == req.Resource.To {
			zero++
			if got := ct.restored[req.Trial][req.Segment]; got != req.Trial {
				t.Errorf("trial %d segment %d at its rung restored trial %d's checkpoint", req.Trial, req.Segment, got)
			}
		}
	}
	if zero == 0 {
		t.Error("no segment was sent to the rung its trial stood on")
	}
}
