// Package spec decodes, validates and encodes space files (space.yaml): the
// declaration of a study's search space, objective, trainer, sampler,
// budget and backend.
package spec

import "time"

// Spec is a validated space file. Decode fills in defaults, so every field
// holds the value in force.
type Spec struct {
	// Name identifies the study; running the same space file again resumes it.
	Name      string
	Objective Objective
	// Params in declaration order; samplers rely on this order.
	Params  []Param
	Trainer Trainer
	Sampler Sampler
	// MaxTrials is how many trials the study runs. Required.
	MaxTrials int
	// MaxConcurrency is how many trials run at once. Defaults to 1.
	MaxConcurrency int
	Budget         Budget
	Backend        Backend
	Checkpoint     Checkpoint
	// Scheduler stops unpromising trials early; the zero value runs every
	// trial to the end.
	Scheduler Scheduler
	// Resources declares what a trial needs, for placement.
	Resources Resources
	// Pool, when set, is the worker pool that runs the trials that do not
	// fit the backend.
	Pool *Pool
}

// KeepPolicy says which checkpoints remain when a study ends.
type KeepPolicy string

const (
	// KeepBest keeps the newest checkpoint of the best trial only.
	KeepBest KeepPolicy = "best"
	// KeepAll keeps every trial's retained checkpoints.
	KeepAll KeepPolicy = "all"
	// KeepNone deletes every checkpoint.
	KeepNone KeepPolicy = "none"
)

// Checkpoint says where trials write checkpoints, how often, and what is
// kept.
type Checkpoint struct {
	// Store is where checkpoints go: file:///path, a path, or
	// s3://bucket/prefix. Defaults to the state directory's checkpoints
	// folder.
	Store string
	// Every is the interval between checkpoints of a running segment.
	// Defaults to 1 minute.
	Every time.Duration
	// Grace is how long before a segment's deadline the trainer stops to
	// write its last checkpoint (a command gets SIGTERM then). Defaults to a
	// tenth of backend.max_runtime, at most 10 seconds, or 10 seconds when
	// there is no max_runtime.
	Grace time.Duration
	// KeepLast is how many of a trial's newest checkpoints are kept while
	// it runs. Defaults to 2.
	KeepLast int
	// Keep (keep_checkpoints) decides what remains when the study ends.
	// Defaults to best.
	Keep KeepPolicy
}

// Goal is the direction of optimisation.
type Goal string

const (
	Minimize Goal = "minimize"
	Maximize Goal = "maximize"
)

// Objective names the metric the study optimises.
type Objective struct {
	// Metric is the name of a metric the trainer reports, e.g. "val_accuracy".
	Metric string
	Goal   Goal
}

// ParamType is the kind of a parameter.
type ParamType string

const (
	Float       ParamType = "float"
	Int         ParamType = "int"
	Categorical ParamType = "categorical"
	Constant    ParamType = "constant"
)

// Param declares one parameter of the space.
type Param struct {
	Name string
	Type ParamType
	// Min and Max bound float and int parameters (inclusive). For int
	// parameters they hold whole numbers.
	Min, Max float64
	// Log samples on a log scale; requires Min > 0.
	Log bool
	// Step is the spacing of an int parameter's values from Min (default 1).
	Step int64
	// Values are a categorical parameter's choices: string, int64, float64
	// or bool.
	Values []any
	// Value is a constant parameter's value: string, int64, float64 or bool.
	Value any
	// Points are explicit grid points of a float parameter (the grid
	// sampler needs them; other samplers ignore them).
	Points []float64
	// When makes the parameter active only when every condition holds.
	When []Condition
}

// Condition holds when parameter Param has one of Values.
type Condition struct {
	Param  string
	Values []any
}

// Trainer says what a trial runs: a built-in workload or a command.
type Trainer struct {
	// Builtin names a built-in workload, e.g. "digits-mlp".
	Builtin string
	// Command is the program and its arguments, e.g. ["python3", "train.py"].
	Command []string
	Env     map[string]string
	// Dir is the command's working directory. Relative paths are resolved
	// against the space file's directory; defaults to that directory.
	Dir string
	// Timeout bounds one trial run. Defaults to 1 hour.
	Timeout time.Duration
}

// SamplerType names a sampler.
type SamplerType string

const (
	Random          SamplerType = "random"
	Grid            SamplerType = "grid"
	Sobol           SamplerType = "sobol"
	TPE             SamplerType = "tpe"
	TPEMultivariate SamplerType = "tpe-multivariate"
	GP              SamplerType = "gp"
	CMAES           SamplerType = "cmaes"
)

// Sampler chooses how trials' parameters are proposed.
type Sampler struct {
	// Type defaults to random.
	Type SamplerType
	// Seed makes the search reproducible. Defaults to 0.
	Seed int64
}

// Budget limits a study. Zero means no limit.
type Budget struct {
	MaxWall    time.Duration
	MaxCostUSD float64
}

// BackendType names where trials run.
type BackendType string

const (
	// Local runs trials as processes on this machine.
	Local BackendType = "local"
	// Lambda runs each segment as an AWS Lambda invocation.
	Lambda BackendType = "lambda"
	// CloudRun runs each segment as a Google Cloud Run job execution.
	CloudRun BackendType = "cloudrun"
)

// Backend says where trials run and what their compute costs. A segment
// billed for s seconds costs s x (MemoryMB/1024 x PricePerGBSecond + VCPU x
// PricePerVCPUSecond + GPUs x PricePerGPUSecond) + PricePerRequest.
type Backend struct {
	// Type defaults to local.
	Type BackendType
	// MemoryMB is the memory size billed per segment: 128 to 10240 (32768
	// on cloudrun). Defaults to 1024.
	MemoryMB int
	// PricePerGBSecond defaults to the AWS Lambda list price for the
	// architecture (arm64: 0.0000133334 USD, x86_64: 0.0000166667 USD; the
	// local backend uses arm64's), and to Cloud Run's 0.000002 USD per
	// GiB-second (list prices; override them for your region and discounts).
	PricePerGBSecond float64
	// PricePerRequest defaults to the AWS Lambda list price, 0.0000002 USD
	// (0.20 USD per million requests); 0 on Cloud Run.
	PricePerRequest float64
	// MaxRuntime bounds one segment: a trial that needs longer is trained
	// in several segments, each resuming from the last checkpoint. Zero
	// means no bound (the local default). Lambda: at most and by default 15
	// minutes; Cloud Run: at most and by default 24 hours.
	MaxRuntime time.Duration

	// Function is the Lambda function's name or ARN (lambda; required).
	Function string
	// Region is the AWS or Google Cloud region (lambda: defaults to the
	// AWS configuration's; cloudrun: required).
	Region string
	// Architecture is the Lambda function's: arm64 (default) or x86_64.
	Architecture string
	// Concurrency caps the invocations in flight for the function, over
	// every study this coordinator runs (lambda; default 100).
	Concurrency int

	// Project and Job name the Cloud Run job (cloudrun; required).
	Project, Job string
	// VCPU is the job's CPU count (cloudrun; default 1).
	VCPU float64
	// GPUs is the job's GPU count (cloudrun; default 0).
	GPUs int
	// PricePerVCPUSecond defaults to Cloud Run's 0.000018 USD on cloudrun,
	// 0 elsewhere.
	PricePerVCPUSecond float64
	// PricePerGPUSecond defaults to Cloud Run's L4 price, 0.0001867 USD, on
	// cloudrun, 0 elsewhere.
	PricePerGPUSecond float64
}

// SegmentCost prices a segment billed for the given duration.
func (b Backend) SegmentCost(billed time.Duration) float64 {
	return billed.Seconds()*b.RatePerSecond() + b.PricePerRequest
}

// RatePerSecond is what a second of a running segment costs.
func (b Backend) RatePerSecond() float64 {
	return float64(b.MemoryMB)/1024*b.PricePerGBSecond + b.VCPU*b.PricePerVCPUSecond + float64(b.GPUs)*b.PricePerGPUSecond
}

// Defaults, documented on the fields above.
const (
	DefaultMemoryMB         = 1024
	DefaultPricePerGBSecond = 0.0000133334
	DefaultPricePerRequest  = 0.20 / 1e6

	// AWS Lambda.
	LambdaX86PricePerGBSecond = 0.0000166667
	LambdaMaxRuntime          = 15 * time.Minute
	DefaultLambdaConcurrency  = 100

	// Google Cloud Run jobs (instance-based billing, tier 1 regions).
	CloudRunPricePerVCPUSecond = 0.000018
	CloudRunPricePerGBSecond   = 0.000002
	CloudRunPricePerGPUSecond  = 0.0001867
	CloudRunMaxRuntime         = 24 * time.Hour
	DefaultTimeout             = time.Hour
	DefaultMaxConcurrency      = 1
	DefaultCheckpointEvery     = time.Minute
	DefaultKeepLast            = 2
	DefaultMaxGrace            = 10 * time.Second
)

// GraceOrDefault returns c.Grace, or its default for a backend with the
// given max runtime.
func (c Checkpoint) GraceOrDefault(maxRuntime time.Duration) time.Duration {
	switch {
	case c.Grace > 0:
		return c.Grace
	case maxRuntime > 0:
		return min(maxRuntime/10, DefaultMaxGrace)
	}
	return DefaultMaxGrace
}
