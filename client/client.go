// Package client is the Go client of the hpsearch HTTP API (`hpsearch
// serve`): create studies from space documents, watch them, read their
// trials and best trial, stop, resume and cancel them, and run ask/tell
// loops that evaluate trials themselves.
//
// Every method takes a context and returns an *Error when the server
// answers with one; errors.Is matches it against ErrUnauthorized,
// ErrNotFound, ErrInvalid and ErrConflict.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Sentinels that an *Error matches with errors.Is, by HTTP status.
var (
	ErrUnauthorized = errors.New("unauthorized")    // 401
	ErrNotFound     = errors.New("not found")       // 404
	ErrInvalid      = errors.New("invalid request") // 400, 413
	ErrConflict     = errors.New("conflict")        // 409
)

// Error is an error the server answered with.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int `json:"-"`
	// Code says what went wrong; see the Code constants.
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request parameter, header or body field at fault.
	Field string `json:"field,omitempty"`
	// Line and Column locate the fault in the request body, when it has
	// one place (the first of Problems, for a space document).
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
	// Problems lists every problem of a space document.
	Problems []Problem `json:"problems,omitempty"`
}

// Error returns the server's message.
func (e *Error) Error() string {
	if e.Field != "" && !strings.Contains(e.Message, e.Field) {
		return fmt.Sprintf("%s (%s)", e.Message, e.Field)
	}
	return e.Message
}

// Is matches the sentinel of e's status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrInvalid:
		return e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusRequestEntityTooLarge
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	}
	return false
}

// Client talks to one hpsearch server. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer token of every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends requests with hc instead of http.DefaultClient
// (for TLS settings or a proxy). Event streams last long: hc should have
// no Timeout; bound requests with their context instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the server at server, e.g.
// "http://127.0.0.1:8080".
func New(server string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(server, "/"))
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", server, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http://HOST:PORT or https://HOST:PORT", server)
	}
	c := &Client{base: u, hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// CreateOptions are the optional parameters of CreateStudy.
type CreateOptions struct {
	// Mode defaults to ModeRun.
	Mode Mode
	// NoStart creates the study stopped; ResumeStudy starts it.
	NoStart bool
	// Filename names the document in problems; defaults to "space.yaml".
	Filename string
}

// CreateStudy creates a study from a space document (YAML or JSON) and,
// unless opts.NoStart, starts it. A document with problems gives an
// *Error with Code CodeInvalidSpace and every problem in Problems.
func (c *Client) CreateStudy(ctx context.Context, space []byte, opts *CreateOptions) (*Study, error) {
	q := url.Values{}
	if opts != nil {
		if opts.Mode != "" {
			q.Set("mode", string(opts.Mode))
		}
		if opts.NoStart {
			q.Set("start", "false")
		}
		if opts.Filename != "" {
			q.Set("filename", opts.Filename)
		}
	}
	var st Study
	return &st, c.do(ctx, http.MethodPost, "/v1/studies", q, space, &st)
}

// ListStudies returns every study, oldest first.
func (c *Client) ListStudies(ctx context.Context) ([]*Study, error) {
	var out struct {
		Studies []*Study `json:"studies"`
	}
	return out.Studies, c.do(ctx, http.MethodGet, "/v1/studies", nil, nil, &out)
}

// GetStudy returns the study with the given name or ID.
func (c *Client) GetStudy(ctx context.Context, study string) (*Study, error) {
	var st Study
	return &st, c.do(ctx, http.MethodGet, studyPath(study, ""), nil, nil, &st)
}

// StopStudy stops a study; running trials are asked to checkpoint and are
// recorded as interrupted. ResumeStudy resumes it.
func (c *Client) StopStudy(ctx context.Context, study string) (*Study, error) {
	var st Study
	return &st, c.do(ctx, http.MethodPost, studyPath(study, "/stop"), nil, nil, &st)
}

// CancelStudy stops a study for good: it cannot be resumed.
func (c *Client) CancelStudy(ctx context.Context, study string) (*Study, error) {
	var st Study
	return &st, c.do(ctx, http.MethodPost, studyPath(study, "/cancel"), nil, nil, &st)
}

// ResumeStudy starts a stopped study again. space, if not nil, replaces
// the study's space document: it may change max_trials, max_concurrency,
// budget, backend and checkpoint, not the search. filename names it in
// problems.
func (c *Client) ResumeStudy(ctx context.Context, study string, space []byte, filename string) (*Study, error) {
	q := url.Values{}
	if filename != "" {
		q.Set("filename", filename)
	}
	var st Study
	return &st, c.do(ctx, http.MethodPost, studyPath(study, "/resume"), q, space, &st)
}

// ListTrials returns one page of a study's trials.
func (c *Client) ListTrials(ctx context.Context, study string, tq TrialQuery) (*TrialPage, error) {
	q := url.Values{}
	for _, s := range tq.States {
		q.Add("state", string(s))
	}
	if tq.Sort != "" {
		q.Set("sort", tq.Sort)
	}
	if tq.Offset > 0 {
		q.Set("offset", strconv.Itoa(tq.Offset))
	}
	if tq.Limit > 0 {
		q.Set("limit", strconv.Itoa(tq.Limit))
	}
	if tq.NoMetrics {
		q.Set("metrics", "false")
	}
	var page TrialPage
	return &page, c.do(ctx, http.MethodGet, studyPath(study, "/trials"), q, nil, &page)
}

// AllTrials returns every trial of a study that tq selects, reading all
// the pages from tq.Offset on.
func (c *Client) AllTrials(ctx context.Context, study string, tq TrialQuery) ([]*Trial, error) {
	tq.Limit = 1000
	var all []*Trial
	for {
		page, err := c.ListTrials(ctx, study, tq)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Trials...)
		if page.NextOffset == 0 {
			return all, nil
		}
		tq.Offset = page.NextOffset
	}
}

// GetTrial returns one trial of a study.
func (c *Client) GetTrial(ctx context.Context, study string, number int) (*Trial, error) {
	var t Trial
	return &t, c.do(ctx, http.MethodGet, studyPath(study, "/trials/"+strconv.Itoa(number)), nil, nil, &t)
}

// Best returns a study's best completed trial; a study with none gives an
// *Error with Code CodeNoCompletedTrial.
func (c *Client) Best(ctx context.Context, study string) (*Trial, error) {
	var t Trial
	return &t, c.do(ctx, http.MethodGet, studyPath(study, "/best"), nil, nil, &t)
}

// Ask returns a new trial of an ask/tell study, running, with the
// parameters to evaluate.
func (c *Client) Ask(ctx context.Context, study string) (*Trial, error) {
	var t Trial
	return &t, c.do(ctx, http.MethodPost, studyPath(study, "/ask"), nil, nil, &t)
}

// Tell reports on a trial of an ask/tell study: intermediate metrics, or
// its end (completed with its value, or failed). It returns the trial as
// recorded.
func (c *Client) Tell(ctx context.Context, study string, number int, r Report) (*Trial, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	var t Trial
	return &t, c.do(ctx, http.MethodPost, studyPath(study, "/trials/"+strconv.Itoa(number)+"/tell"), nil, body, &t)
}

func studyPath(study, rest string) string {
	return "/v1/studies/" + url.PathEscape(study) + rest
}

// request builds an authenticated request for path with query q.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body []byte) (*http.Request, error) {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a request and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		if !json.Valid(body) {
			req.Header.Set("Content-Type", "application/yaml")
		}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// readError turns an error response into an *Error.
func readError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body ErrorBody
	if err := json.Unmarshal(data, &body); err != nil || body.Error == nil {
		msg := strings.TrimSpace(string(data))
		if msg == "" {
			msg = resp.Status
		}
		return &Error{StatusCode: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("%s: %s", resp.Status, msg)}
	}
	body.Error.StatusCode = resp.StatusCode
	return body.Error
}
