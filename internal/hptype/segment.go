package hptype

import (
	"encoding/json"
	"fmt"
	"time"
)

// APIVersion is the version of the trainer contract. A trainer refuses a
// request of another version.
const APIVersion = "hpsearch/v1"

// Workload says what a trainer runs: a built-in workload or a command.
type Workload struct {
	// Builtin names a workload compiled into the trainer, e.g. "digits-mlp".
	Builtin string `json:"builtin,omitempty"`
	// Command is the program and its arguments, e.g. ["python3", "train.py"].
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Dir is the command's working directory.
	Dir string `json:"dir,omitempty"`
}

// ResourceRange is the span of training a segment covers, in the
// workload's unit (epochs for the built-in workloads).
type ResourceRange struct {
	// From is the resource the trial has reached: the resource of the
	// checkpoint the segment resumes from, or 0.
	From float64 `json:"from"`
	// To is the resource to train up to; 0 means the workload's own end
	// (e.g. the epochs parameter).
	To   float64 `json:"to,omitempty"`
	Unit string  `json:"unit,omitempty"`
}

// CheckpointPolicy says where a trainer writes checkpoints and when.
type CheckpointPolicy struct {
	// Store is the object store's URI: file:///path or s3://bucket/prefix.
	Store string `json:"store"`
	// Prefix is the trial's folder in the store.
	Prefix string `json:"prefix"`
	// Every is the interval between checkpoints.
	Every Duration `json:"every"`
	// Grace is how long before the deadline the trainer stops to write its
	// last checkpoint (a command gets SIGTERM then).
	Grace Duration `json:"grace"`
	// KeepLast is how many of the trial's newest checkpoints to keep.
	KeepLast int `json:"keep_last"`
	// Inherited is the ID of a checkpoint the trial took over from another
	// trial (population-based training): made with other hyperparameters,
	// it is still the state to resume from, so a trainer that checks that a
	// checkpoint matches its configuration accepts this one if its shapes
	// fit.
	Inherited string `json:"inherited,omitempty"`
}

// CheckpointRef names a checkpoint a segment wrote or resumed from.
type CheckpointRef struct {
	// ID is "segment.attempt.seq", e.g. "000003.002.0001".
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	Resource  float64   `json:"resource"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"created_at"`
}

// SegmentRequest asks a trainer to run one bounded segment of a trial.
type SegmentRequest struct {
	APIVersion string `json:"api_version"`
	Study      string `json:"study"`
	StudyName  string `json:"study_name"`
	Trial      int    `json:"trial"`
	Segment    int    `json:"segment"`
	Attempt    int    `json:"attempt"`
	Params     Params `json:"params"`
	// Seed makes the workload deterministic; the coordinator derives it from
	// the sampler seed and the trial number.
	Seed int64 `json:"seed"`
	// Deadline is when the segment must have returned; the trainer writes
	// its last checkpoint Checkpoint.Grace before it.
	Deadline time.Time     `json:"deadline"`
	Resource ResourceRange `json:"resource"`
	// Checkpoint, when set, makes the segment resume from the trial's newest
	// valid checkpoint and write new ones.
	Checkpoint *CheckpointPolicy `json:"checkpoint,omitempty"`
	Workload   Workload          `json:"workload"`
	// LogPath, when set, is a file the trainer appends the workload's log to.
	LogPath string `json:"log_path,omitempty"`
}

// SegmentStatus is how a segment ended.
type SegmentStatus string

const (
	// SegmentCompleted: the workload reached its end.
	SegmentCompleted SegmentStatus = "completed"
	// SegmentSuspended: the segment stopped before the end (its deadline
	// came, or it was asked to stop) and wrote a checkpoint to resume from.
	SegmentSuspended SegmentStatus = "suspended"
	// SegmentFailed: the workload failed; running it again would not help.
	SegmentFailed SegmentStatus = "failed"
)

// Usage is what a segment consumed.
type Usage struct {
	WallMS int64 `json:"wall_ms"`
	// BilledMS is the billed duration: the platform's own figure where it
	// reports one (a Lambda REPORT line), else the measured duration
	// rounded up to the millisecond, and then Estimated is set.
	BilledMS        int64 `json:"billed_ms"`
	Estimated       bool  `json:"estimated,omitempty"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// Throttles counts the times the platform refused the invocation for
	// lack of capacity before it ran (a Lambda 429).
	Throttles int `json:"throttles,omitempty"`
}

// SegmentResult is a trainer's answer to a SegmentRequest.
type SegmentResult struct {
	APIVersion string        `json:"api_version"`
	Study      string        `json:"study"`
	Trial      int           `json:"trial"`
	Segment    int           `json:"segment"`
	Attempt    int           `json:"attempt"`
	Status     SegmentStatus `json:"status"`
	// ResourceReached is the last step the workload reported.
	ResourceReached float64  `json:"resource_reached"`
	Metrics         []Metric `json:"metrics"`
	// Checkpoint is the newest checkpoint the segment wrote, if any.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
	// ResumedFrom is the checkpoint the segment restored, if any.
	ResumedFrom *CheckpointRef `json:"resumed_from,omitempty"`
	// Warnings are problems the segment worked around, such as a corrupt
	// checkpoint it skipped.
	Warnings []string `json:"warnings,omitempty"`
	Error    string   `json:"error,omitempty"`
	// Retryable marks a failed segment whose failure was not the
	// workload's (the checkpoint store unreachable, the deadline reached
	// while saving): running it again from the last checkpoint may succeed.
	Retryable bool  `json:"retryable,omitempty"`
	Usage     Usage `json:"usage"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("1m30s").
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"1m30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
