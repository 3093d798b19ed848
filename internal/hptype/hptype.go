// Package hptype holds the domain types every other hpsearch package shares:
// studies, trials, their states, parameters, metrics and the trainer contract.
// It imports only the standard library so that any package can depend on it.
package hptype

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrNotFound is returned when a study, trial or job does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a compare-and-set finds that the record changed
// since it was read (a late or duplicate update).
var ErrConflict = errors.New("conflict: record changed since it was read")

// ErrExists is returned when creating a record whose key is already taken.
var ErrExists = errors.New("already exists")

// Params maps parameter names to values. Values are float64, int64, string
// or bool. Values that went through JSON may come back as other numeric
// types; use Float and Int to read them.
type Params map[string]any

// Float returns the named parameter as a float64.
func (p Params) Float(name string) (float64, error) {
	v, ok := p[name]
	if !ok {
		return 0, fmt.Errorf("parameter %q: %w", name, ErrNotFound)
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case interface{ Float64() (float64, error) }:
		return x.Float64()
	}
	return 0, fmt.Errorf("parameter %q is %T, not a number", name, v)
}

// Int returns the named parameter as an int64. A float with a fractional
// part is an error.
func (p Params) Int(name string) (int64, error) {
	f, err := p.Float(name)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("parameter %q is %v, not an integer", name, f)
	}
	return int64(f), nil
}

// String returns the named parameter as a string.
func (p Params) String(name string) (string, error) {
	v, ok := p[name]
	if !ok {
		return "", fmt.Errorf("parameter %q: %w", name, ErrNotFound)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("parameter %q is %T, not a string", name, v)
	}
	return s, nil
}

// Metric is one value a trainer reported at a point of training.
type Metric struct {
	// Step is the resource reached when the value was measured (an epoch
	// number for the built-in workloads).
	Step  float64 `json:"step"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// TrialState is where a trial is in its life.
type TrialState string

const (
	TrialQueued      TrialState = "queued"
	TrialRunning     TrialState = "running"
	TrialCompleted   TrialState = "completed"
	TrialFailed      TrialState = "failed"
	TrialPruned      TrialState = "pruned"
	TrialInterrupted TrialState = "interrupted"
)

// Finished reports whether the state is terminal.
func (s TrialState) Finished() bool {
	return s == TrialCompleted || s == TrialFailed || s == TrialPruned
}

// Attempt records one run of one segment of a trial: its timings, usage,
// outcome and the work it lost.
type Attempt struct {
	// Number counts the trial's attempts over all its segments, from 1.
	Number  int `json:"number"`
	Segment int `json:"segment"`
	// ResourceFrom and ResourceTo are the resource the attempt started from
	// and the one it left saved (in a checkpoint or as the trial's end).
	ResourceFrom float64 `json:"resource_from"`
	ResourceTo   float64 `json:"resource_to"`
	// ResourceTarget is what the segment was asked to train up to: a rung
	// of the scheduler, or its max; 0 for the workload's own end.
	ResourceTarget float64   `json:"resource_target,omitempty"`
	StartedAt      time.Time `json:"started_at"`
	FinishedAt     time.Time `json:"finished_at,omitzero"`
	Status         string    `json:"status,omitempty"`
	Error          string    `json:"error,omitempty"`
	WallSeconds    float64   `json:"wall_seconds"`
	CostUSD        float64   `json:"cost_usd"`
	// BilledEstimated says the billed time was measured by hpsearch, not
	// reported by the platform.
	BilledEstimated bool `json:"billed_estimated,omitempty"`
	// Throttles counts the platform's refusals before the attempt ran.
	Throttles int `json:"throttles,omitempty"`
	// WastedSeconds and WastedCostUSD are the part of the attempt whose
	// work was lost: done after its last checkpoint and not kept.
	WastedSeconds float64 `json:"wasted_seconds"`
	WastedCostUSD float64 `json:"wasted_cost_usd"`
	// Checkpoint is the newest checkpoint the attempt wrote.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
}

// Trial is one configuration of a study's space with its whole history.
type Trial struct {
	Study  string     `json:"study"`
	Number int        `json:"number"`
	Params Params     `json:"params"`
	State  TrialState `json:"state"`
	// Version is incremented by the store on every update; an update that
	// carries an older version fails with ErrConflict.
	Version int64 `json:"version"`
	// LeaseToken is the queue lease held by the attempt that is running.
	LeaseToken string `json:"lease_token,omitempty"`
	// Segment is the number of the segment to run next (or running).
	Segment int `json:"segment"`
	// Resource is the resource the trial has reached and saved.
	Resource float64 `json:"resource"`
	// Checkpoint is the trial's newest checkpoint.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
	Attempts   []Attempt      `json:"attempts,omitempty"`
	Metrics    []Metric       `json:"metrics,omitempty"`
	// Placement says where the trial's segments run, and why.
	Placement *Placement `json:"placement,omitempty"`
	// Rungs are the scheduler's decisions about the trial, oldest first.
	Rungs []RungDecision `json:"rungs,omitempty"`
	// Value is the objective's final value; set when the trial completed.
	Value      *float64  `json:"value,omitempty"`
	Error      string    `json:"error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Placement is where a trial's segments run: the function backend, or a
// worker pool (Pool names it).
type Placement struct {
	Pool   string `json:"pool,omitempty"`
	Reason string `json:"reason"`
}

// WorkerUsage is a pool worker's ledger: how long it has run, busy or idle,
// since it started. Pool machines are billed per hour either way.
type WorkerUsage struct {
	ID           string    `json:"id"`
	Pool         string    `json:"pool"`
	InstanceType string    `json:"instance_type,omitempty"`
	PricePerHour float64   `json:"price_per_hour"`
	StartedAt    time.Time `json:"started_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	BusySeconds  float64   `json:"busy_seconds"`
	IdleSeconds  float64   `json:"idle_seconds"`
	Segments     int       `json:"segments"`
	// Stopped is set when the worker exited.
	Stopped bool `json:"stopped,omitempty"`
}

// RungAction is what a scheduler decided about a trial at a rung.
type RungAction string

const (
	// RungContinue lets the trial train on to its next rung (a promotion).
	RungContinue RungAction = "continue"
	// RungStop stops the trial: it ends pruned.
	RungStop RungAction = "stop"
	// RungExploit (PBT) replaces the trial's training state with a copy of
	// a better trial's checkpoint and its parameters with perturbed copies
	// of that trial's; the trial then trains on.
	RungExploit RungAction = "exploit"
)

// RungDecision is a scheduler's decision about a trial that reached a rung.
type RungDecision struct {
	// Seq orders the decisions of a study, from 1: a decision depends only
	// on the decisions with a smaller Seq, so it is the same when replayed.
	Seq int `json:"seq"`
	// Bracket is the trial's Hyperband bracket (0 for other schedulers).
	Bracket int `json:"bracket,omitempty"`
	// Rung counts the trial's rungs from 0.
	Rung     int     `json:"rung"`
	Resource float64 `json:"resource"`
	// Value is the objective's value at the rung.
	Value  float64    `json:"value"`
	Action RungAction `json:"action"`
	Reason string     `json:"reason,omitempty"`
	// Donor is the trial whose checkpoint an exploit copied, and
	// DonorParams its parameters; the trial's own parameters before the
	// exploit are in ParamsBefore. Together they are the trial's lineage.
	Donor *int `json:"donor,omitempty"`
	// Checkpoint is the ID of the trial's copy of the donor's checkpoint.
	Checkpoint   string    `json:"checkpoint,omitempty"`
	DonorParams  Params    `json:"donor_params,omitempty"`
	ParamsBefore Params    `json:"params_before,omitempty"`
	DecidedAt    time.Time `json:"decided_at"`
}

// WallSeconds is the compute time of all the trial's attempts.
func (t *Trial) WallSeconds() float64 {
	var s float64
	for _, a := range t.Attempts {
		s += a.WallSeconds
	}
	return s
}

// WastedSeconds is the compute time whose work the trial lost.
func (t *Trial) WastedSeconds() float64 {
	var s float64
	for _, a := range t.Attempts {
		s += a.WastedSeconds
	}
	return s
}

// Segments counts the segments the trial has finished or is running.
func (t *Trial) Segments() int {
	if len(t.Attempts) == 0 {
		return 0
	}
	return t.Attempts[len(t.Attempts)-1].Segment + 1
}

// CostUSD is the cost of all the trial's attempts.
func (t *Trial) CostUSD() float64 {
	var c float64
	for _, a := range t.Attempts {
		c += a.CostUSD
	}
	return c
}

// StudyState is where a study is in its life.
type StudyState string

const (
	StudyRunning StudyState = "running"
	// StudyStopped means the user stopped the study; running it again resumes it.
	StudyStopped   StudyState = "stopped"
	StudyCompleted StudyState = "completed"
	// StudyFailed means every trial of the study failed.
	StudyFailed StudyState = "failed"
	// StudyBudgetExhausted means a budget limit stopped the study; raising
	// the limit and running it again resumes it.
	StudyBudgetExhausted StudyState = "budget_exhausted"
	// StudyCancelled means the user cancelled the study: it does not resume.
	StudyCancelled StudyState = "cancelled"
)

// Study is one search.
type Study struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Spec is the study's space file in canonical form (see spec.Encode).
	Spec []byte `json:"spec"`
	// SearchFingerprint identifies the parts of the spec that decide which
	// trials exist (space, sampler, objective, trainer). A study can resume
	// only with the same fingerprint.
	SearchFingerprint string     `json:"search_fingerprint"`
	State             StudyState `json:"state"`
	Version           int64      `json:"version"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	// ElapsedSeconds is the wall time the study has run, over all runs.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}
