package coordinator

import (
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// Summarize computes a study's progress from its trials. It has no side
// effects; the CLI uses it for studies that are not running.
func Summarize(obj spec.Objective, maxTrials int, elapsedSeconds float64, trials []*hptype.Trial) Progress {
	p := Progress{MaxTrials: maxTrials, Created: len(trials), ElapsedSeconds: elapsedSeconds}
	for _, t := range trials {
		switch t.State {
		case hptype.TrialQueued:
			p.Queued++
		case hptype.TrialRunning:
			p.Running++
		case hptype.TrialCompleted:
			p.Completed++
		case hptype.TrialFailed:
			p.Failed++
		case hptype.TrialInterrupted:
			p.Interrupted++
		case hptype.TrialPruned:
			p.Pruned++
		}
		for _, a := range t.Attempts {
			p.ResourceTrained += max(0, a.ResourceTo-a.ResourceFrom)
			p.CostUSD += a.CostUSD
			p.WastedCostUSD += a.WastedCostUSD
			p.Throttles += a.Throttles
			ms := int64(a.WallSeconds * 1000)
			p.BilledMS += ms
			if a.BilledEstimated {
				p.EstimatedMS += ms
			}
		}
		if Better(obj, t, p.Best) {
			p.Best = t
		}
	}
	return p
}

// Better reports whether trial a is a better completed trial than b (b may
// be nil) for the objective; ties go to the lower trial number.
func Better(obj spec.Objective, a, b *hptype.Trial) bool {
	if a == nil || a.State != hptype.TrialCompleted || a.Value == nil {
		return false
	}
	if b == nil || b.Value == nil {
		return true
	}
	if *a.Value == *b.Value {
		return a.Number < b.Number
	}
	if obj.Goal == spec.Maximize {
		return *a.Value > *b.Value
	}
	return *a.Value < *b.Value
}
