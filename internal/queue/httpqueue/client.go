package httpqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hpsearch/hpsearch/internal/queue"
)

// maxErrorBytes is how much of an error answer the client reads.
const maxErrorBytes = 64 << 10

// errClientClosed is returned by the calls of a closed Client.
var errClientClosed = fmt.Errorf("the client was closed: %w", queue.ErrClosed)

// ClientOptions configure NewClient.
type ClientOptions struct {
	// Token is the bearer token sent with every request: the queue's
	// shared secret. Required; without it every call fails with an error
	// wrapping ErrUnauthorized.
	Token string
	// HTTPClient sends the requests. Its Timeout, if it has one, must be
	// longer than MaxWait, or long polls fail. Defaults to a client of the
	// Client's own, on a clone of http.DefaultTransport, that follows no
	// redirects and whose idle connections Close closes.
	HTTPClient *http.Client
	// MaxWait caps the wait of one lease request; a longer LeaseParams.Wait
	// is spent in several requests. It must be shorter than the idle
	// timeout of any proxy in between. The server caps the wait too, at its
	// HandlerOptions.MaxWait. Defaults to 20 seconds.
	MaxWait time.Duration
}

// Client is a queue.Queue whose calls are requests to a server of Handler.
// It retries nothing: a call whose request fails in transport returns the
// error, and when the call changes the queue the caller cannot know
// whether the server applied it.
type Client struct {
	base    string
	token   string
	hc      *http.Client
	ownsHC  bool
	maxWait time.Duration

	closeOnce sync.Once
	closed    chan struct{}
}

var _ queue.Queue = (*Client)(nil)

// NewClient returns a client of the queue served at baseURL, the URL of
// the handler's prefix: "https://coordinator:7070/queue".
func NewClient(baseURL string, opts ClientOptions) *Client {
	c := &Client{
		base:    strings.TrimRight(baseURL, "/"),
		token:   opts.Token,
		hc:      opts.HTTPClient,
		maxWait: opts.MaxWait,
		closed:  make(chan struct{}),
	}
	if c.hc == nil {
		c.hc = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
		c.ownsHC = true
	}
	if c.maxWait <= 0 {
		c.maxWait = DefaultMaxWait
	}
	return c
}

// Close makes further calls fail with queue.ErrClosed and wakes waiting
// Lease calls, which return it too. Calls under way otherwise run to their
// end. Close closes the idle connections of the client's own HTTPClient.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.ownsHC {
			c.hc.CloseIdleConnections()
		}
	})
	return nil
}

// Enqueue implements queue.Queue.
func (c *Client) Enqueue(ctx context.Context, jobs ...queue.Job) (queue.EnqueueResult, error) {
	req := enqueueRequest{Jobs: make([]wireJob, len(jobs))}
	for i, j := range jobs {
		req.Jobs[i] = toWireJob(j)
	}
	var resp enqueueResponse
	if err := c.call(ctx, "enqueue", http.MethodPost, "/enqueue", req, &resp); err != nil {
		return queue.EnqueueResult{}, err
	}
	return queue.EnqueueResult{Added: resp.Added, Existing: resp.Existing}, nil
}

// Lease implements queue.Queue. Its wait is a long poll, in as many
// requests of at most MaxWait as it takes. Close ends the wait with
// queue.ErrClosed. If ctx is canceled or Close is called after the server
// leased jobs but before its answer arrived, those leases are lost to the
// caller and expire after p.Visibility.
func (c *Client) Lease(ctx context.Context, p queue.LeaseParams) ([]queue.Lease, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-c.closed:
			cancel(errClientClosed)
		case <-ctx.Done():
		}
	}()
	deadline := time.Now().Add(p.Wait)
	wait := p.Wait
	for {
		req := leaseRequest{
			Max:        p.Max,
			Visibility: duration(p.Visibility),
			Wait:       duration(min(wait, c.maxWait)),
			Owner:      p.Owner,
		}
		var resp leaseResponse
		if err := c.call(ctx, "lease", http.MethodPost, "/lease", req, &resp); err != nil {
			return nil, err
		}
		if len(resp.Leases) > 0 {
			leases := make([]queue.Lease, len(resp.Leases))
			for i, l := range resp.Leases {
				leases[i] = queue.Lease{Job: l.Job.job(), Token: l.Token, Attempt: l.Attempt, Expires: l.Expires}
			}
			return leases, nil
		}
		if wait = time.Until(deadline); wait <= 0 {
			return nil, nil
		}
	}
}

// Extend implements queue.Queue.
func (c *Client) Extend(ctx context.Context, token string, visibility time.Duration) (time.Time, error) {
	var resp extendResponse
	if err := c.call(ctx, "extend", http.MethodPost, "/extend", extendRequest{Token: token, Visibility: duration(visibility)}, &resp); err != nil {
		return time.Time{}, err
	}
	return resp.Expires, nil
}

// Ack implements queue.Queue.
func (c *Client) Ack(ctx context.Context, tokens ...string) error {
	return c.call(ctx, "ack", http.MethodPost, "/ack", ackRequest{Tokens: orEmpty(tokens)}, nil)
}

// Nack implements queue.Queue.
func (c *Client) Nack(ctx context.Context, token, cause string) error {
	return c.call(ctx, "nack", http.MethodPost, "/nack", nackRequest{Token: token, Cause: cause}, nil)
}

// Release implements queue.Queue.
func (c *Client) Release(ctx context.Context, token string) error {
	return c.call(ctx, "release", http.MethodPost, "/release", releaseRequest{Token: token}, nil)
}

// Get implements queue.Queue.
func (c *Client) Get(ctx context.Context, id string) (queue.JobInfo, error) {
	var resp wireInfo
	if err := c.call(ctx, fmt.Sprintf("get %q", id), http.MethodGet, "/jobs/"+escapeID(id), nil, &resp); err != nil {
		return queue.JobInfo{}, err
	}
	return resp.info(), nil
}

// Stats implements queue.Queue.
func (c *Client) Stats(ctx context.Context) (queue.Stats, error) {
	var resp wireStats
	if err := c.call(ctx, "stats", http.MethodGet, "/stats", nil, &resp); err != nil {
		return queue.Stats{}, err
	}
	return queue.Stats(resp), nil
}

// Dead implements queue.Queue.
func (c *Client) Dead(ctx context.Context) ([]queue.JobInfo, error) {
	var resp deadResponse
	if err := c.call(ctx, "dead", http.MethodGet, "/dead", nil, &resp); err != nil {
		return nil, err
	}
	dead := make([]queue.JobInfo, len(resp.Jobs))
	for i, info := range resp.Jobs {
		dead[i] = info.info()
	}
	return dead, nil
}

// escapeID escapes a job ID for the path, dots included, so that an ID
// such as ".." or "a/../b" is not taken for a path step.
func escapeID(id string) string {
	return strings.ReplaceAll(url.PathEscape(id), ".", "%2E")
}

// call sends in (when not nil) as the JSON body of a request to path and
// decodes the answer into out (when not nil). Its error names op, the
// method and the URL.
func (c *Client) call(ctx context.Context, op, method, path string, in, out any) error {
	u := c.base + path
	if err := c.do(ctx, method, u, in, out); err != nil {
		return fmt.Errorf("httpqueue: %s (%s %s): %w", op, method, u, err)
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, u string, in, out any) error {
	select {
	case <-c.closed:
		return errClientClosed
	default:
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("make the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if err := contextError(ctx); err != nil {
			return err
		}
		// The url.Error repeats the method and URL that call names.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	defer func() {
		// Read to the end so that the connection can be used again.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBytes))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if err := contextError(ctx); err != nil {
			return err
		}
		return fmt.Errorf("decode the answer (%d): %w", resp.StatusCode, err)
	}
	return nil
}

// readError makes the *ServerError of an error answer.
func readError(resp *http.Response) *ServerError {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	se := &ServerError{Status: resp.StatusCode}
	var body errorBody
	if err == nil && json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		se.Code, se.Message, se.Tokens = body.Error.Code, body.Error.Message, body.Error.Tokens
		return se
	}
	se.Message = strings.TrimSpace(string(data))
	if len(se.Message) > 200 {
		se.Message = se.Message[:200] + "..."
	}
	if se.Message == "" {
		se.Message = "(no body)"
	}
	if err != nil {
		se.Message += fmt.Sprintf(" (read the body: %v)", err)
	}
	return se
}

// contextError returns the error of a done ctx with its cause, or nil.
func contextError(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, errClientClosed) {
		return cause
	}
	if cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}
