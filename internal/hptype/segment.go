package hptype

import "time"

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
	Seed     int64     `json:"seed"`
	Deadline time.Time `json:"deadline"`
	Workload Workload  `json:"workload"`
	// LogPath, when set, is a file the trainer appends the workload's log to.
	LogPath string `json:"log_path,omitempty"`
}

// SegmentStatus is how a segment ended.
type SegmentStatus string

const (
	SegmentCompleted SegmentStatus = "completed"
	SegmentFailed    SegmentStatus = "failed"
)

// Usage is what a segment consumed.
type Usage struct {
	WallMS          int64 `json:"wall_ms"`
	BilledMS        int64 `json:"billed_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
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
	Error           string   `json:"error,omitempty"`
	Usage           Usage    `json:"usage"`
}
