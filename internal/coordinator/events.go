package coordinator

import (
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// EventKind names what happened.
type EventKind string

const (
	StudyStarted   EventKind = "study_started"
	TrialStarted   EventKind = "trial_started"
	TrialCompleted EventKind = "trial_completed"
	TrialFailed    EventKind = "trial_failed"
	TrialRetrying  EventKind = "trial_retrying"
	// TrialSuspended: a segment reached its deadline and checkpointed; the
	// trial continues with its next segment.
	TrialSuspended   EventKind = "trial_suspended"
	TrialInterrupted EventKind = "trial_interrupted"
	// TrialRung: the scheduler let a trial that reached a rung go on (or,
	// PBT, reseeded it from a better trial); the decision is the trial's
	// last Rungs entry.
	TrialRung EventKind = "trial_rung"
	// TrialPruned: the scheduler stopped a trial at a rung.
	TrialPruned   EventKind = "trial_pruned"
	StudyFinished EventKind = "study_finished"
)

// Event is one change in a study, with the progress after it.
type Event struct {
	Time  time.Time `json:"time"`
	Kind  EventKind `json:"kind"`
	Study string    `json:"study"`
	// Trial is a copy of the trial the event is about, if any, without its
	// metric history (hpsearch trials --json has it).
	Trial *hptype.Trial `json:"trial,omitempty"`
	// Message explains the event (an error, a reason to stop).
	Message  string   `json:"message,omitempty"`
	Progress Progress `json:"progress"`
}

// Progress summarises a study at one moment.
type Progress struct {
	MaxTrials   int `json:"max_trials"`
	Created     int `json:"created"`
	Queued      int `json:"queued"`
	Running     int `json:"running"`
	Completed   int `json:"completed"`
	Failed      int `json:"failed"`
	Interrupted int `json:"interrupted"`
	// Pruned counts the trials a scheduler stopped early.
	Pruned int `json:"pruned"`
	// ResourceTrained is the training resource (epochs, steps) all attempts
	// covered and kept, over all trials.
	ResourceTrained float64 `json:"resource_trained"`
	CostUSD         float64 `json:"cost_usd"`
	// WastedCostUSD is the cost of attempts whose work was lost (crashed,
	// interrupted or retried).
	WastedCostUSD  float64 `json:"wasted_cost_usd"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Throttles counts the invocations the platform refused for lack of
	// capacity and hpsearch retried; they cost nothing and fail nothing.
	Throttles int `json:"throttles"`
	// BilledMS is the billed time over all attempts; EstimatedMS is the
	// part of it hpsearch measured because the platform reported none.
	BilledMS    int64 `json:"billed_ms"`
	EstimatedMS int64 `json:"estimated_ms"`
	// Pool is the use of the worker pool, when the study has one.
	Pool *PoolProgress `json:"pool,omitempty"`
	// Best is the best completed trial so far, if any (in events, without
	// its metric history).
	Best *hptype.Trial `json:"best,omitempty"`
}
