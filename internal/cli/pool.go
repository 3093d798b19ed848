package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hpsearch/hpsearch/internal/checkpoint"
	"github.com/hpsearch/hpsearch/internal/executor"
	"github.com/hpsearch/hpsearch/internal/executor/pool"
	"github.com/hpsearch/hpsearch/internal/hptype"
	"github.com/hpsearch/hpsearch/internal/localstate"
	"github.com/hpsearch/hpsearch/internal/queue"
	"github.com/hpsearch/hpsearch/internal/queue/httpqueue"
	"github.com/hpsearch/hpsearch/internal/spec"
	"github.com/hpsearch/hpsearch/internal/worker"
)

// envPoolToken is the shared secret pool workers present to the queue
// hpsearch run serves them; the workers get it as HPSEARCH_TOKEN.
const envPoolToken = "HPSEARCH_POOL_TOKEN"

// envPoolTLSCert and envPoolTLSKey name a certificate and its key (PEM
// files): with them the pool's queue is served over HTTPS, as it must be
// when workers reach it over a network.
const (
	envPoolTLSCert = "HPSEARCH_POOL_TLS_CERT"
	envPoolTLSKey  = "HPSEARCH_POOL_TLS_KEY"
)

// poolWiring is what a study with a worker pool adds to its coordinator.
type poolWiring struct {
	exec  executor.Executor
	usage func(ctx context.Context) ([]hptype.WorkerUsage, error)
	close func()
}

// newPool opens the space file's worker pool, if it has one: the queue its
// workers lease from (served over HTTP on pool.listen, or SQS) and the
// executor that puts segments on it.
func newPool(ctx context.Context, st *localstate.State, sp *spec.Spec, ckpts *checkpoint.Store, logger *slog.Logger) (poolWiring, error) {
	p := sp.Pool
	if p == nil {
		return poolWiring{close: func() {}}, nil
	}
	q, closeQueue, err := openPoolQueue(ctx, st, p, logger)
	if err != nil {
		return poolWiring{}, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	return poolWiring{
		exec: pool.New(q, ckpts, time.Second),
		usage: func(ctx context.Context) ([]hptype.WorkerUsage, error) {
			return worker.ReadUsage(ctx, ckpts.Blobs(), p.Name)
		},
		close: closeQueue,
	}, nil
}

// openPoolQueue opens the pool's queue: the state directory's, served to
// workers over HTTP, or an SQS queue.
func openPoolQueue(ctx context.Context, st *localstate.State, p *spec.Pool, logger *slog.Logger) (queue.Queue, func(), error) {
	if p.Queue != "http" {
		q, err := openSQSQueue(ctx, p.Queue)
		if err != nil {
			return nil, nil, err
		}
		return q, func() { q.Close() }, nil
	}
	token := os.Getenv(envPoolToken)
	if token == "" {
		return nil, nil, fmt.Errorf("set %s to the secret the pool's workers will present (they get it as HPSEARCH_TOKEN), e.g. export %s=$(openssl rand -hex 32)", envPoolToken, envPoolToken)
	}
	cert, key := os.Getenv(envPoolTLSCert), os.Getenv(envPoolTLSKey)
	if (cert == "") != (key == "") {
		return nil, nil, fmt.Errorf("set both %s and %s (PEM files) to serve the pool queue over HTTPS, or neither", envPoolTLSCert, envPoolTLSKey)
	}
	var tlsConfig *tls.Config
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, nil, fmt.Errorf("load the pool queue's certificate (%s, %s): %w", envPoolTLSCert, envPoolTLSKey, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	q, err := st.PoolQueue(p.Name)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", p.Listen)
	if err != nil {
		q.Close()
		return nil, nil, fmt.Errorf("serve the pool queue on %s (pool.listen): %w", p.Listen, err)
	}
	scheme := "http"
	if tlsConfig != nil {
		ln, scheme = tls.NewListener(ln, tlsConfig), "https"
	} else if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		logger.Warn("the pool queue is served without TLS on a non-loopback address: its token crosses the network in clear; set "+envPoolTLSCert+" and "+envPoolTLSKey, "listen", p.Listen)
	}
	srv := &http.Server{
		Handler:           httpqueue.Handler(q, httpqueue.HandlerOptions{Verify: httpqueue.SharedToken(token), Prefix: "/"}),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("the pool queue's server stopped", "error", err)
		}
	}()
	logger.Info("serving the pool queue to workers", "pool", p.Name, "url", scheme+"://"+ln.Addr().String())
	return q, func() {
		// Closing the queue first answers the workers' long polls at once.
		q.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
