package client

import (
	"time"

	"github.com/hpsearch/hpsearch/internal/hptype"
)

// Trial is one configuration of a study's space with its whole history:
// parameters, state, attempts (segments run, their cost), metrics reported
// and, once completed, the objective's value. It has the JSON form of
// `hpsearch trials --json`.
type Trial = hptype.Trial

// Metric is one value reported at a step of training.
type Metric = hptype.Metric

// Params maps parameter names to values (float64, int64 or json numbers,
// strings, booleans); Params.Float, Params.Int and Params.String read them.
type Params = hptype.Params

// TrialState is where a trial is in its life.
type TrialState = hptype.TrialState

// The states of a trial.
const (
	TrialQueued      = hptype.TrialQueued
	TrialRunning     = hptype.TrialRunning
	TrialCompleted   = hptype.TrialCompleted
	TrialFailed      = hptype.TrialFailed
	TrialPruned      = hptype.TrialPruned
	TrialInterrupted = hptype.TrialInterrupted
)

// StudyState is where a study is in its life.
type StudyState = hptype.StudyState

// The states of a study.
const (
	StudyRunning         = hptype.StudyRunning
	StudyStopped         = hptype.StudyStopped
	StudyCompleted       = hptype.StudyCompleted
	StudyFailed          = hptype.StudyFailed
	StudyBudgetExhausted = hptype.StudyBudgetExhausted
	StudyCancelled       = hptype.StudyCancelled
)

// Mode says who evaluates a study's trials.
type Mode string

const (
	// ModeRun: the server runs the trials with the space document's
	// trainer, on its backend.
	ModeRun Mode = "run"
	// ModeAskTell: the client evaluates the trials: it asks for a trial's
	// parameters and tells the server what they gave.
	ModeAskTell Mode = "ask_tell"
)

// Study is a study as the API shows it.
type Study struct {
	ID    string     `json:"id"`
	Name  string     `json:"name"`
	Mode  Mode       `json:"mode"`
	State StudyState `json:"state"`
	// Active says the study is running in the server now: its coordinator
	// runs (mode run), or it accepts asks (mode ask_tell). A study whose
	// state is running but is not active was left running by a process
	// that died; resume it.
	Active    bool      `json:"active"`
	Objective Objective `json:"objective"`
	Sampler   string    `json:"sampler"`
	Backend   string    `json:"backend"`
	// Spec is the study's space document in canonical form (YAML), with
	// every default filled in.
	Spec string `json:"spec"`
	// SearchFingerprint identifies what decides the study's trials; a
	// study resumes only with a space document of the same fingerprint.
	SearchFingerprint string    `json:"search_fingerprint"`
	Version           int64     `json:"version"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	ElapsedSeconds    float64   `json:"elapsed_seconds"`
	Progress          Progress  `json:"progress"`
	Cost              Cost      `json:"cost"`
	// LastEventID is the ID of the study's newest event when the study was
	// read: follow its events from there to miss none of what comes next.
	LastEventID int64 `json:"last_event_id"`
	// LogDir is the server's folder of the study's trial logs.
	LogDir string `json:"log_dir,omitempty"`
}

// Objective names the metric a study optimises and in which direction.
type Objective struct {
	Metric string `json:"metric"`
	// Goal is minimize or maximize.
	Goal string `json:"goal"`
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
	Pruned  int     `json:"pruned"`
	CostUSD float64 `json:"cost_usd"`
	// WastedCostUSD is the cost of work that was lost (crashed,
	// interrupted or retried attempts).
	WastedCostUSD  float64 `json:"wasted_cost_usd"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Throttles counts invocations the platform refused and hpsearch
	// retried.
	Throttles int `json:"throttles"`
	// BilledMS is the billed time of all attempts; EstimatedMS the part
	// hpsearch measured because the platform reported none.
	BilledMS    int64 `json:"billed_ms"`
	EstimatedMS int64 `json:"estimated_ms"`
	// ResourceTrained is the training resource (epochs, steps) all
	// attempts covered and kept.
	ResourceTrained float64 `json:"resource_trained"`
	// Pool is the use of the worker pool, when the study has one.
	Pool *PoolProgress `json:"pool,omitempty"`
	// Best is the best completed trial so far (in events, without its
	// metric history).
	Best *Trial `json:"best,omitempty"`
}

// PoolProgress is the use of a study's worker pool: its workers' time,
// busy or idle (pool machines are billed by the hour either way), and what
// the idle time cost. The busy time's cost is in the trials' attempts.
type PoolProgress struct {
	Name        string  `json:"name"`
	Workers     int     `json:"workers"`
	BusySeconds float64 `json:"busy_seconds"`
	IdleSeconds float64 `json:"idle_seconds"`
	Utilisation float64 `json:"utilisation"`
	IdleCostUSD float64 `json:"idle_cost_usd"`
	CostUSD     float64 `json:"cost_usd"`
	Trials      int     `json:"trials"`
}

// Cost breaks a study's cost down.
type Cost struct {
	Backend  string `json:"backend"`
	MemoryMB int    `json:"memory_mb"`
	// USDPerSecond is what a second of a running segment costs.
	USDPerSecond float64 `json:"usd_per_second"`
	TotalUSD     float64 `json:"total_usd"`
	WastedUSD    float64 `json:"wasted_usd"`
	// ByTrialState sums the cost of the trials in each state.
	ByTrialState map[string]float64 `json:"by_trial_state"`
	// ByAttemptStatus sums the cost of the attempts that ended each way:
	// completed, suspended, failed, error, interrupted, lost, running.
	ByAttemptStatus map[string]float64 `json:"by_attempt_status"`
}

// TrialPage is one page of a study's trials.
type TrialPage struct {
	Trials []*Trial `json:"trials"`
	// Total counts the trials that match the query, over all pages.
	Total int `json:"total"`
	// NextOffset is the offset of the next page; 0 when this is the last.
	NextOffset int `json:"next_offset,omitempty"`
}

// TrialQuery selects and orders a study's trials.
type TrialQuery struct {
	// States keeps the trials in one of these states; empty keeps all.
	States []TrialState
	// Sort is "number" (the default) or "value": completed trials best
	// first, then the others by number.
	Sort string
	// Offset skips this many matching trials.
	Offset int
	// Limit is the page size: 1 to 1000, 100 when 0.
	Limit int
	// NoMetrics leaves out the trials' metric histories.
	NoMetrics bool
}

// Report is what a client tells the server about a trial it evaluates.
type Report struct {
	// Metrics are values measured since the last report; they are added
	// to the trial's history.
	Metrics []Metric `json:"metrics,omitempty"`
	// State ends the trial: completed or failed. Empty keeps it running
	// (an intermediate report).
	State TrialState `json:"state,omitempty"`
	// Value is the objective's final value of a completed trial; it
	// defaults to the newest reported value of the objective's metric.
	Value *float64 `json:"value,omitempty"`
	// Error says why a failed trial failed.
	Error string `json:"error,omitempty"`
}

// EventKind names what happened.
type EventKind string

// The kinds of events.
const (
	EventStudyStarted   EventKind = "study_started"
	EventTrialStarted   EventKind = "trial_started"
	EventTrialCompleted EventKind = "trial_completed"
	EventTrialFailed    EventKind = "trial_failed"
	EventTrialRetrying  EventKind = "trial_retrying"
	// EventTrialSuspended: a segment reached its deadline and checkpointed; the
	// trial goes on with its next segment.
	EventTrialSuspended   EventKind = "trial_suspended"
	EventTrialInterrupted EventKind = "trial_interrupted"
	// EventTrialReported: an ask/tell client reported intermediate metrics.
	EventTrialReported EventKind = "trial_reported"
	// EventStudyFinished: the study stopped running (completed, failed, spent
	// its budget, stopped or cancelled; State says which). It is the last
	// event of a stream.
	EventStudyFinished EventKind = "study_finished"
	// EventResync: events were missed (the server restarted, or they are older
	// than it keeps); read the study again. It has no ID.
	EventResync EventKind = "resync"
)

// Event is one change in a study.
type Event struct {
	// ID orders a study's events; it increases across server restarts.
	ID      int64     `json:"id,omitempty"`
	Time    time.Time `json:"time"`
	Kind    EventKind `json:"kind"`
	Study   string    `json:"study"`
	StudyID string    `json:"study_id"`
	// State is the study's state after the event.
	State StudyState `json:"state,omitempty"`
	// Trial is the trial the event is about, if any, without its metric
	// history.
	Trial *Trial `json:"trial,omitempty"`
	// Metrics are the trial's metrics reported since its previous event.
	Metrics []Metric `json:"metrics,omitempty"`
	// Message explains the event: an error, a reason to stop.
	Message  string   `json:"message,omitempty"`
	Progress Progress `json:"progress"`
}

// ErrorBody is the JSON body of every error response: {"error": {...}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Problem is one problem found in a space document.
type Problem struct {
	// File names the document, as the request's filename parameter did.
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// Error codes the server answers with, in Error.Code.
const (
	CodeUnauthorized     = "unauthorized"       // 401: no token, or not a valid one
	CodeNotFound         = "not_found"          // 404: no such study or trial
	CodeNoRoute          = "no_route"           // 404: no such route
	CodeNoCompletedTrial = "no_completed_trial" // 404: the study has no best trial yet
	CodeMethod           = "method_not_allowed" // 405
	CodeInvalidSpace     = "invalid_space"      // 400: the space document has problems (see Problems)
	CodeInvalid          = "invalid_request"    // 400: a parameter or body field is wrong (see Field)
	CodeTooLarge         = "too_large"          // 413: the request body is over the limit
	CodeExists           = "exists"             // 409: a study of that name exists; resume it
	CodeRunning          = "running"            // 409: the study is running already
	CodeNotRunning       = "not_running"        // 409: the study is not running
	CodeCancelled        = "cancelled"          // 409: the study was cancelled and does not resume
	CodeFinished         = "finished"           // 409: the study or trial has finished
	CodeWrongMode        = "wrong_mode"         // 409: ask/tell on a study the server runs, or the reverse
	CodeMaxTrials        = "max_trials"         // 409: the study has all its max_trials trials
	CodeExhausted        = "exhausted"          // 409: the sampler has no more trials (grid)
	CodeSearchChanged    = "search_changed"     // 409: the document's search differs from the study's
	CodeConflict         = "conflict"           // 409: the record changed concurrently; retry
	CodeShuttingDown     = "shutting_down"      // 503: the server is stopping
	CodeInternal         = "internal"           // 500
)
