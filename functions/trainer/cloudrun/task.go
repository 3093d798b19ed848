// Package cloudrun runs the trainer as a task of a Google Cloud Run job
// execution: each task runs one segment with trainer.Run. The executor in
// internal/executor/cloudrun starts the executions; the trainer's bootstrap
// calls RunTask when CLOUD_RUN_JOB is set.
//
// # The request
//
// A task finds its SegmentRequest in the environment, which the execution's
// overrides set. Exactly one of these is given:
//
//	HPSEARCH_REQUEST      the request as plain JSON
//	HPSEARCH_REQUEST_URI  an object holding the request as JSON:
//	                      s3://bucket/key, file:///path or a plain path
//
// HPSEARCH_REQUEST is plain JSON, not base64: JSON is UTF-8 text, which an
// environment variable holds as it is, and it stays readable in the Cloud
// Run console's execution details. A Cloud Run variable holds at most
// 32,768 bytes (MaxEnvRequest); a larger request goes through an object.
//
// A single request is for task 0 only: an execution of several tasks (task
// count > 1) needs HPSEARCH_REQUEST_URI to name a folder, with a trailing
// slash, where task i (CLOUD_RUN_TASK_INDEX) reads "<uri><i>.json". The
// tasks of such an execution are several segments run side by side.
//
// # Attempts
//
// The coordinator retries segments itself, each time with a new attempt
// number: the number names the checkpoints the attempt writes and the
// result it stores, and it fences off late results of older attempts. A
// retry by Cloud Run (max_retries > 0) would run the same attempt a second
// time: it would write checkpoint IDs and a result that the failed try may
// already have written, at a moment the coordinator does not know of, and
// with the task timeout starting afresh, past the segment's deadline.
// Folding Cloud Run's attempt into ours (attempt*100 + task attempt) does
// not work either: checkpoint IDs hold attempts 0..999 only, and the
// coordinator would get results of attempts it never issued. So the job
// must have max_retries = 0 (the executor checks), and a task whose
// CLOUD_RUN_TASK_ATTEMPT is not 0 refuses to run: its execution fails and
// the coordinator retries the segment from its newest checkpoint.
//
// # The result
//
// The result is stored where the executor reads it: next to the trial's
// checkpoints (checkpoint.Store.PutResult) when the request has a
// checkpoint policy, and at HPSEARCH_RESULT_URI when that is set: an
// object URI, or a folder with a trailing slash where task i writes
// "<i>.json". One of the two is required; without either the task fails
// before it trains. The result is also printed on standard output as one
// JSON line, which Cloud Logging keeps as a structured entry.
//
// RunTask fails, and the task exits non-zero, only when the request cannot
// be read, the task is a retry, or the result could not be written: a
// segment that failed is a result like any other.
//
// # Deadline and signals
//
// The segment stops at its request's deadline, less the checkpoint grace;
// the executor sets the task timeout a margin beyond it. Cloud Run sends
// SIGTERM, and SIGKILL 10 seconds later, when it cancels an execution or
// its timeout passes: RunTask then cancels the segment, whose trainer
// writes a last checkpoint and its result.
//
// The workload's log goes to standard error, which Cloud Logging collects:
// a request's LogPath names a file on the coordinator's machine, so a task
// replaces it with /dev/stderr.
package cloudrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hpsearch/hpsearch/functions/trainer"
	"github.com/hpsearch/hpsearch/internal/blob"
	"github.com/hpsearch/hpsearch/internal/blob/bloburl"
	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/hptype"
)

// The environment variables a task reads. CLOUD_RUN_* are set by Cloud Run;
// HPSEARCH_* by the execution's overrides.
const (
	EnvRequest     = "HPSEARCH_REQUEST"
	EnvRequestURI  = "HPSEARCH_REQUEST_URI"
	EnvResultURI   = "HPSEARCH_RESULT_URI"
	EnvTaskIndex   = "CLOUD_RUN_TASK_INDEX"
	EnvTaskAttempt = "CLOUD_RUN_TASK_ATTEMPT"
)

// MaxEnvRequest is the most bytes HPSEARCH_REQUEST may hold: the limit of a
// Cloud Run environment variable's value.
const MaxEnvRequest = 32768

// maxRequestBytes bounds a request read from an object.
const maxRequestBytes = 16 << 20

// writeTimeout bounds writing the result, which happens even after the
// segment was cancelled.
const writeTimeout = 30 * time.Second

// logPath is where a task sends the workload's log.
const logPath = "/dev/stderr"

// RunTask runs the segment of this Cloud Run task, configured by the
// process's environment as the package doc describes; SIGTERM and SIGINT
// cancel the segment so that it checkpoints. It prints the result on
// standard output.
func RunTask(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	return Run(ctx, os.Getenv, os.Stdout)
}

// Run is RunTask with the environment read through getenv and the result
// printed to stdout; cancelling ctx stands for SIGTERM.
func Run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	index, err := envInt(getenv, EnvTaskIndex)
	if err != nil {
		return err
	}
	attempt, err := envInt(getenv, EnvTaskAttempt)
	if err != nil {
		return err
	}
	if attempt != 0 {
		return fmt.Errorf("cloudrun task: this is Cloud Run's retry %d of task %d; hpsearch retries segments itself with a new attempt number, so a retry of the same attempt is refused: set max_retries = 0 on the job (gcloud run jobs update JOB --max-retries 0)", attempt, index)
	}
	req, err := readRequest(ctx, getenv, index)
	if err != nil {
		return err
	}
	dest, err := openResultURI(ctx, getenv(EnvResultURI), index)
	if err != nil {
		return err
	}
	if req.Checkpoint == nil && dest == nil {
		return fmt.Errorf("cloudrun task: the request for trial %d segment %d has no checkpoint policy and %s is not set, so its result could not be stored anywhere; give one of them", req.Trial, req.Segment, EnvResultURI)
	}
	req.LogPath = logPath

	res := trainer.Run(ctx, req)
	raw, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("cloudrun task: encode the result of trial %d segment %d: %w", req.Trial, req.Segment, err)
	}
	fmt.Fprintf(stdout, "%s\n", raw)

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	var errs []error
	if req.Checkpoint != nil {
		errs = append(errs, putCheckpointResult(wctx, req, raw))
	}
	if dest != nil {
		errs = append(errs, dest.put(wctx, raw))
	}
	return errors.Join(errs...)
}

// envInt reads a non-negative integer from the environment; unset is 0.
func envInt(getenv func(string) string, name string) (int, error) {
	s := getenv(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cloudrun task: %s is %q, not a task number (Cloud Run sets it to 0, 1, ...)", name, s)
	}
	return n, nil
}

// readRequest reads the request of task index from HPSEARCH_REQUEST or
// HPSEARCH_REQUEST_URI.
func readRequest(ctx context.Context, getenv func(string) string, index int) (hptype.SegmentRequest, error) {
	var req hptype.SegmentRequest
	inline, uri := getenv(EnvRequest), getenv(EnvRequestURI)
	var (
		data  []byte
		where string
	)
	switch {
	case inline != "" && uri != "":
		return req, fmt.Errorf("cloudrun task: both %s and %s are set; give the request in one of them", EnvRequest, EnvRequestURI)
	case inline != "":
		if index != 0 {
			return req, fmt.Errorf("cloudrun task: %s holds one request, for task 0, but this is task %d; run one task per execution, or give %s as a folder of <index>.json requests", EnvRequest, index, EnvRequestURI)
		}
		data, where = []byte(inline), EnvRequest
	case uri != "":
		o, err := taskObject(uri, index, EnvRequestURI)
		if err != nil {
			return req, err
		}
		where = o.uri
		data, err = o.read(ctx)
		if err != nil {
			return req, err
		}
	default:
		return req, fmt.Errorf("cloudrun task: no segment request: set %s (the request as JSON) or %s (an object holding it) in the execution's overrides", EnvRequest, EnvRequestURI)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("cloudrun task: the segment request in %s is not valid JSON of the trainer contract: %w (is the trainer image of the coordinator's hpsearch release?)", where, err)
	}
	return req, nil
}

// object is one object in a blob store: the key under the store that
// dir names.
type object struct {
	uri, dir, key string
}

// taskObject resolves the object of task index that uri (read from the
// variable env) names: uri itself, or "<uri><index>.json" when uri is a
// folder (ends in a slash). A single object is for task 0 only.
func taskObject(uri string, index int, env string) (object, error) {
	if strings.HasSuffix(uri, "/") {
		uri += strconv.Itoa(index) + ".json"
	} else if index != 0 {
		return object{}, fmt.Errorf("cloudrun task: %s names one object, for task 0, but this is task %d; end it with a slash to name a folder of <index>.json objects", env, index)
	}
	o, err := splitURI(uri)
	if err != nil {
		return object{}, fmt.Errorf("cloudrun task: %s: %w", env, err)
	}
	return o, nil
}

// splitURI splits an object's URI into the URI of the store holding it and
// its key: s3://bucket/a/b.json is the key "b.json" in s3://bucket/a, and
// file:///tmp/b.json the key "b.json" in file:///tmp. A key in a URI with a
// scheme is percent-decoded, as bloburl decodes the store's part.
func splitURI(uri string) (object, error) {
	scheme, rest, hasScheme := strings.Cut(uri, "://")
	if !hasScheme {
		rest = uri
	}
	var dir, key string
	switch i := strings.LastIndex(rest, "/"); {
	case i < 0 && strings.EqualFold(scheme, "s3"):
		return object{}, fmt.Errorf("%q names a bucket, not an object; write s3://bucket/key", uri)
	case i < 0:
		dir, key = ".", rest
	case i == 0:
		dir, key = "/", rest[1:]
	default:
		dir, key = rest[:i], rest[i+1:]
	}
	if hasScheme {
		dir = scheme + "://" + dir
		var err error
		if key, err = url.PathUnescape(key); err != nil {
			return object{}, fmt.Errorf("%q: %w (escape %% as %%25)", uri, err)
		}
	}
	if err := blob.CheckKey(key); err != nil {
		return object{}, fmt.Errorf("%q does not name an object: %w", uri, err)
	}
	return object{uri: uri, dir: dir, key: key}, nil
}

func (o object) open(ctx context.Context) (blob.Store, error) {
	b, err := bloburl.Open(ctx, o.dir)
	if err != nil {
		return nil, fmt.Errorf("cloudrun task: open the store of %s: %w", o.uri, err)
	}
	return b, nil
}

// read returns the object's bytes.
func (o object) read(ctx context.Context) ([]byte, error) {
	b, err := o.open(ctx)
	if err != nil {
		return nil, err
	}
	rc, err := b.Get(ctx, o.key)
	if err != nil {
		return nil, fmt.Errorf("cloudrun task: read the segment request %s: %w", o.uri, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cloudrun task: read the segment request %s: %w", o.uri, err)
	}
	if len(data) > maxRequestBytes {
		return nil, fmt.Errorf("cloudrun task: the segment request %s is more than %d bytes; a request is a small JSON document", o.uri, maxRequestBytes)
	}
	return data, nil
}

// resultDest is where HPSEARCH_RESULT_URI says the result goes.
type resultDest struct {
	object
	store blob.Store
}

// openResultURI opens the store of task index's result object at uri, or
// returns nil when uri is empty. It runs before the segment, so that a bad
// URI costs no training.
func openResultURI(ctx context.Context, uri string, index int) (*resultDest, error) {
	if uri == "" {
		return nil, nil
	}
	o, err := taskObject(uri, index, EnvResultURI)
	if err != nil {
		return nil, err
	}
	b, err := o.open(ctx)
	if err != nil {
		return nil, err
	}
	return &resultDest{object: o, store: b}, nil
}

// put writes the result once: an object already there is an error, since
// it is the result of another task or execution.
func (d *resultDest) put(ctx context.Context, raw []byte) error {
	err := d.store.Put(ctx, d.key, bytes.NewReader(raw), int64(len(raw)), blob.PutOptions{IfNotExists: true})
	switch {
	case errors.Is(err, blob.ErrExists):
		return fmt.Errorf("cloudrun task: store the result at %s: %w; it holds the result of an earlier run: give every execution its own %s", d.uri, err, EnvResultURI)
	case err != nil:
		return fmt.Errorf("cloudrun task: store the result at %s: %w", d.uri, err)
	}
	return nil
}

// putCheckpointResult stores the result next to the trial's checkpoints.
// trainer.Run has stored it already unless that failed; PutResult accepts
// the same bytes again, so this makes sure it is there.
func putCheckpointResult(ctx context.Context, req hptype.SegmentRequest, raw []byte) error {
	cp := req.Checkpoint
	b, err := bloburl.Open(ctx, cp.Store)
	if err != nil {
		return fmt.Errorf("cloudrun task: open the checkpoint store to store the result: %w", err)
	}
	if err := checkpoint.New(b).PutResult(ctx, cp.Prefix, req.Segment, req.Attempt, raw); err != nil {
		return fmt.Errorf("cloudrun task: store the result of trial %d segment %d attempt %d: %w", req.Trial, req.Segment, req.Attempt, err)
	}
	return nil
}
