// Package api is the HTTP API of `hpsearch serve`: JSON routes under /v1/
// over the same coordinator that `hpsearch run` uses, to create studies
// from space documents and run them, watch them (Server-Sent Events), read
// their trials and best trial, stop, resume and cancel them, and ask/tell
// for clients that evaluate trials themselves. The routes are described by
// the OpenAPI document served at /openapi.json; Prometheus metrics are at
// /metrics. The Go client is package client.
//
// The server owns its state directory: it runs each started study's
// coordinator in a goroutine of its own, with its own context; stopping a
// study cancels that context, and the coordinator records the interrupted
// trials and the study as stopped. Routes are registered on their own
// paths, so a dashboard can be mounted at / beside them.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/spec"
	"github.com/hpsearch/hpsearch/internal/store"
)

// Wire prepares the coordinator of a study: its queue, executor and
// checkpoint store, as `hpsearch run` does. It returns every field of the
// coordinator's configuration except OnEvent, which the server sets, and a
// function that releases what it opened once the run is over.
type Wire func(ctx context.Context, sp *spec.Spec) (coordinator.Config, func(), error)

// Config configures a Server.
type Config struct {
	// Store holds the studies and trials. Required.
	Store store.Store
	// Wire prepares a study's coordinator. Required.
	Wire Wire
	// Tokens are the hashes of the bearer tokens the server accepts.
	// Required unless NoAuth.
	Tokens *Tokens
	// NoAuth serves without authentication when there are no Tokens.
	NoAuth bool
	// AllowCommands lets space documents use command trainers, which run
	// any program as the server's user. Defaults to false.
	AllowCommands bool
	// LogDir is where trial logs are, as LogDir/STUDY/trial-N.log; studies
	// show it.
	LogDir string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes limits request bodies. Defaults to 1 MiB.
	MaxBodyBytes int64
	// EventsPerStudy is how many of each study's newest events the server
	// keeps in memory for clients that resume a stream. Defaults to 10,000.
	EventsPerStudy int
	// StopWait is how long stop and cancel wait for a running study to
	// record its interrupted trials before they answer. Defaults to 30
	// seconds.
	StopWait time.Duration
	// KeepAlive is the interval of the comments that keep an idle event
	// stream open through proxies. Defaults to 15 seconds.
	KeepAlive time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil || c.Wire == nil {
		return c, errors.New("api: Store and Wire are required")
	}
	if c.Tokens.Len() == 0 {
		if !c.NoAuth {
			return c, errors.New("api: no tokens: give the hashes of the tokens to accept, or NoAuth to serve without authentication")
		}
		c.Tokens = nil
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.EventsPerStudy <= 0 {
		c.EventsPerStudy = 10_000
	}
	if c.StopWait <= 0 {
		c.StopWait = 30 * time.Second
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
	return c, nil
}

// Server serves the API. Create it with New, serve Handler, and call
// Shutdown before the HTTP server's own.
type Server struct {
	cfg     Config
	handler http.Handler
	metrics *metrics
	// idBase makes event IDs increase across restarts: IDs of this process
	// start above the time it started, in microseconds.
	idBase int64
	nextID atomic.Int64
	// closed is closed by Shutdown: event streams end and no study starts.
	closed chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	closing bool
	runs    map[string]*run      // by study ID: the coordinators running
	logs    map[string]*eventLog // by study ID
	locks   map[string]*sync.Mutex
}

// New returns a server.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:    cfg,
		idBase: time.Now().UnixMicro(),
		closed: make(chan struct{}),
		runs:   map[string]*run{},
		logs:   map[string]*eventLog{},
		locks:  map[string]*sync.Mutex{},
	}
	s.metrics = newMetrics(s)
	s.nextID.Store(s.idBase)
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// errShutdown is the cause a server shutdown stops studies with.
var errShutdown = errors.New("the server shut down")

// Shutdown stops every running study and waits, until ctx ends, for their
// coordinators to record the interrupted trials; then it ends the event
// streams. Studies stopped this way are stopped: resume them when the
// server is back.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	for _, r := range s.runs {
		r.cancel(errShutdown)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("stop the running studies: %w", context.Cause(ctx))
	}
	close(s.closed)
	return err
}

// studyLock returns the lock that orders the changes of one study made
// through the API.
func (s *Server) studyLock(id string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[id]
	if !ok {
		l = &sync.Mutex{}
		s.locks[id] = l
	}
	return l
}

// active returns the run of a study, or nil when its coordinator is not
// running.
func (s *Server) active(id string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// shuttingDown reports whether Shutdown was called.
func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// errShuttingDown is the error of a request that would start work while
// the server stops.
func errShuttingDown() *apiError {
	return errorf(http.StatusServiceUnavailable, client.CodeShuttingDown, "the server is shutting down")
}
