package httpqueue

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// ErrUnauthorized is wrapped by the errors of calls that the server refused
// for want of a valid bearer token: ClientOptions.Token is missing or is
// not one the server accepts.
var ErrUnauthorized = errors.New("unauthorized: the queue server refused the bearer token")

// The codes of error answers; the package doc lists them.
const (
	codeInvalid      = "invalid"
	codeUnauthorized = "unauthorized"
	codeNotFound     = "not_found"
	codeNoRoute      = "no_route"
	codeMethod       = "method"
	codeLeaseLost    = "lease_lost"
	codeTooLarge     = "too_large"
	codeClosed       = "closed"
	codeInternal     = "internal"
)

// ServerError is an error answer of the server. It wraps the error its
// code stands for (queue.ErrNotFound, a *queue.LeaseLostError, ...), so
// the errors that Client returns are checked as those of any queue.Queue.
type ServerError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Code is the error code of the answer, empty when the answer was not
	// an error of this protocol (a proxy's error page, say).
	Code string
	// Message is the server's message, or the start of a body that was not
	// an error of this protocol.
	Message string
	// Tokens are the stale tokens of a lease_lost error.
	Tokens []string
}

// Error implements error.
func (e *ServerError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Unwrap returns the error that e's code stands for, or nil.
func (e *ServerError) Unwrap() error {
	switch e.Code {
	case codeLeaseLost:
		return &queue.LeaseLostError{Tokens: e.Tokens}
	case codeNotFound:
		return queue.ErrNotFound
	case codeInvalid, codeTooLarge:
		return queue.ErrInvalid
	case codeClosed:
		return queue.ErrClosed
	case codeUnauthorized:
		return ErrUnauthorized
	}
	return nil
}

// errorBody is the body of an error answer.
type errorBody struct {
	Error wireError `json:"error"`
}

type wireError struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Tokens  []string `json:"tokens,omitempty"`
}

// duration is a time.Duration that is a Go duration string in JSON:
// "30s", "1m30s", "250ms".
type duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"30s\" or \"1m30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

type wireJob struct {
	ID      string   `json:"id"`
	Payload []byte   `json:"payload,omitempty"`
	Delay   duration `json:"delay,omitzero"`
}

func toWireJob(j queue.Job) wireJob {
	return wireJob{ID: j.ID, Payload: j.Payload, Delay: duration(j.Delay)}
}

func (j wireJob) job() queue.Job {
	return queue.Job{ID: j.ID, Payload: j.Payload, Delay: time.Duration(j.Delay)}
}

type enqueueRequest struct {
	Jobs []wireJob `json:"jobs"`
}

type enqueueResponse struct {
	Added    []string `json:"added"`
	Existing []string `json:"existing"`
}

type leaseRequest struct {
	Max        int      `json:"max"`
	Visibility duration `json:"visibility"`
	Wait       duration `json:"wait,omitzero"`
	Owner      string   `json:"owner,omitempty"`
}

type leaseResponse struct {
	Leases []wireLease `json:"leases"`
}

type wireLease struct {
	Job     wireJob   `json:"job"`
	Token   string    `json:"token"`
	Attempt int       `json:"attempt"`
	Expires time.Time `json:"expires"`
}

type extendRequest struct {
	Token      string   `json:"token"`
	Visibility duration `json:"visibility"`
}

type extendResponse struct {
	Expires time.Time `json:"expires"`
}

type ackRequest struct {
	Tokens []string `json:"tokens"`
}

type nackRequest struct {
	Token string `json:"token"`
	Cause string `json:"cause,omitempty"`
}

type releaseRequest struct {
	Token string `json:"token"`
}

type wireInfo struct {
	Job        wireJob     `json:"job"`
	State      queue.State `json:"state"`
	EnqueuedAt time.Time   `json:"enqueued_at"`
	VisibleAt  time.Time   `json:"visible_at,omitzero"`
	Failures   int         `json:"failures,omitempty"`
	Cause      string      `json:"cause,omitempty"`
	Token      string      `json:"token,omitempty"`
	Owner      string      `json:"owner,omitempty"`
	Expires    time.Time   `json:"expires,omitzero"`
	DiedAt     time.Time   `json:"died_at,omitzero"`
}

func toWireInfo(i queue.JobInfo) wireInfo {
	return wireInfo{
		Job:        toWireJob(i.Job),
		State:      i.State,
		EnqueuedAt: i.EnqueuedAt,
		VisibleAt:  i.VisibleAt,
		Failures:   i.Failures,
		Cause:      i.Cause,
		Token:      i.Token,
		Owner:      i.Owner,
		Expires:    i.Expires,
		DiedAt:     i.DiedAt,
	}
}

func (i wireInfo) info() queue.JobInfo {
	return queue.JobInfo{
		Job:        i.Job.job(),
		State:      i.State,
		EnqueuedAt: i.EnqueuedAt,
		VisibleAt:  i.VisibleAt,
		Failures:   i.Failures,
		Cause:      i.Cause,
		Token:      i.Token,
		Owner:      i.Owner,
		Expires:    i.Expires,
		DiedAt:     i.DiedAt,
	}
}

type wireStats struct {
	Ready   int `json:"ready"`
	Delayed int `json:"delayed"`
	Leased  int `json:"leased"`
	Dead    int `json:"dead"`
}

type deadResponse struct {
	Jobs []wireInfo `json:"jobs"`
}
