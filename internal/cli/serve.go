package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hpsearch/hpsearch/internal/api"
	"github.com/hpsearch/hpsearch/internal/coordinator"
	"github.com/hpsearch/hpsearch/internal/dashboard"
	"github.com/hpsearch/hpsearch/internal/spec"
)

type serveOptions struct {
	listen          string
	tokensFile      string
	tlsCert, tlsKey string
	noAuth          bool
	allowCommands   bool
}

func newServeCmd(g *globals) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API over the state directory",
		Long: `Serve the HTTP API (see docs/api.md): create studies from space documents
and run them, watch their events, read their trials and best trial, stop,
resume and cancel them, and ask/tell for pipelines that evaluate trials
themselves. The OpenAPI document is at /openapi.json, Prometheus metrics at
/metrics, and the dashboard at / (open /#token=TOKEN in a browser): the
studies, and per study the trials, the optimization history, the
parameters against the objective, the learning curves with the
scheduler's decisions and the cost, updated live.

The server holds the state directory while it runs, as hpsearch run does.

Every request but /healthz and /openapi.json needs a bearer token whose
hash the server knows: from --tokens-file (one hash a line) and from
$HPSEARCH_TOKENS (comma-separated). hpsearch token makes a token and its
hash. --no-auth serves without tokens, on a loopback address only.

With --tls-cert and --tls-key it serves HTTPS. SIGINT or SIGTERM stops the
running studies cleanly (they are recorded stopped; resume them later)
and then the server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.serve(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	f.StringVar(&o.tokensFile, "tokens-file", "", "file of accepted token hashes, one a line (see hpsearch token)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "certificate file (PEM) to serve HTTPS, with --tls-key")
	f.StringVar(&o.tlsKey, "tls-key", "", "private key file (PEM) of --tls-cert")
	f.BoolVar(&o.noAuth, "no-auth", false, "serve without tokens (loopback addresses only)")
	f.BoolVar(&o.allowCommands, "allow-commands", false, "accept space documents with command trainers, which run any program as this user")
	return cmd
}

// tokens reads the accepted token hashes from --tokens-file and
// HPSEARCH_TOKENS.
func (o serveOptions) tokens() (*api.Tokens, error) {
	all, err := api.ParseTokens("HPSEARCH_TOKENS", os.Getenv("HPSEARCH_TOKENS"))
	if err != nil {
		return nil, err
	}
	if o.tokensFile != "" {
		data, err := os.ReadFile(o.tokensFile)
		if err != nil {
			return nil, fmt.Errorf("--tokens-file: %w", err)
		}
		t, err := api.ParseTokens(o.tokensFile, string(data))
		if err != nil {
			return nil, err
		}
		all.Add(t)
	}
	return all, nil
}

// check refuses options that do not go together.
func (o serveOptions) check(tokens *api.Tokens) error {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	switch {
	case o.noAuth && tokens.Len() > 0:
		return errors.New("--no-auth with tokens: leave out --no-auth to require them, or the tokens to serve without")
	case o.noAuth:
		host, _, err := net.SplitHostPort(o.listen)
		if err != nil {
			return fmt.Errorf("--listen %q: %w", o.listen, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("--no-auth serves anyone who can connect; it is allowed on a loopback address only, not %s", host)
		}
	case tokens.Len() == 0:
		return errors.New("no tokens: make one with `hpsearch token --tokens-file FILE` and pass --tokens-file FILE (or put hashes in HPSEARCH_TOKENS), or serve a loopback address with --no-auth")
	}
	return nil
}

func (g *globals) serve(ctx context.Context, o serveOptions) error {
	tokens, err := o.tokens()
	if err != nil {
		return usageError(err)
	}
	if err := o.check(tokens); err != nil {
		return usageError(err)
	}
	var tlsConfig *tls.Config
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return usageError(fmt.Errorf("--tls-cert, --tls-key: %w", err))
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	st, err := g.openState()
	if err != nil {
		return err
	}
	defer st.Close()
	// Command trainers' relative directories resolve against the server's.
	cwd, err := os.Getwd()
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	logger := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := api.New(api.Config{
		Store: st.Store,
		Wire: func(ctx context.Context, sp *spec.Spec) (coordinator.Config, func(), error) {
			return wire(ctx, st, sp, cwd, logger)
		},
		Tokens:        tokens,
		NoAuth:        o.noAuth,
		AllowCommands: o.allowCommands,
		LogDir:        st.LogDir,
		Logger:        logger,
	})
	if err != nil {
		return &exitError{code: ExitFailed, err: err}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return &exitError{code: ExitFailed, err: fmt.Errorf("--listen: %w", err)}
	}
	hs := &http.Server{
		Handler:           dashboard.Mount(srv.Handler()),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		// Event streams lift the write timeout for themselves.
		WriteTimeout:   time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	logger.Info("listening", "url", scheme+"://"+ln.Addr().String(), "state", st.Dir)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			served <- hs.ServeTLS(ln, "", "")
			return
		}
		served <- hs.Serve(ln)
	}()
	select {
	case err := <-served:
		return &exitError{code: ExitFailed, err: err}
	case <-ctx.Done():
	}
	// A second signal ends the process at once.
	stop()
	logger.Info("shutting down: stopping the running studies")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutdown", "error", err)
	}
	if err := hs.Shutdown(sctx); err != nil {
		logger.Warn("shutdown", "error", err)
		hs.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return &exitError{code: ExitFailed, err: err}
	}
	logger.Info("stopped")
	return nil
}

func newTokenCmd(g *globals) *cobra.Command {
	var tokensFile, label string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make a bearer token for hpsearch serve",
		Long: `Make a random bearer token and print it on stdout. The server keeps only
token hashes: with --tokens-file, the token's hash is added to that file
(created with mode 0600 if missing), which hpsearch serve --tokens-file
reads; otherwise the hash is printed on stderr, for a tokens file or for
HPSEARCH_TOKENS. Clients send the token as Authorization: Bearer TOKEN; the
command line reads it from HPSEARCH_TOKEN.

hpsearch token hash prints the hash of each token read on stdin.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			token, err := api.NewToken()
			if err != nil {
				return &exitError{code: ExitFailed, err: err}
			}
			hash := api.HashToken(token)
			if tokensFile == "" {
				fmt.Fprintf(g.stderr, "hash: %s\n", hash)
				fmt.Fprintln(g.stdout, token)
				return nil
			}
			if label == "" {
				label = "created " + time.Now().UTC().Format(time.RFC3339)
			}
			f, err := os.OpenFile(tokensFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return &exitError{code: ExitFailed, err: err}
			}
			if _, err := fmt.Fprintf(f, "%s %s\n", hash, strings.ReplaceAll(label, "\n", " ")); err != nil {
				f.Close()
				return &exitError{code: ExitFailed, err: err}
			}
			if err := f.Close(); err != nil {
				return &exitError{code: ExitFailed, err: err}
			}
			fmt.Fprintln(g.stdout, token)
			return nil
		},
	}
	cmd.Flags().StringVar(&tokensFile, "tokens-file", "", "add the token's hash to this file")
	cmd.Flags().StringVar(&label, "label", "", "a note kept after the hash in --tokens-file (default: when it was made)")
	cmd.AddCommand(&cobra.Command{
		Use:   "hash",
		Short: "Print the hash of each token read on stdin, one a line",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			sc := bufio.NewScanner(g.stdin)
			for sc.Scan() {
				if t := strings.TrimSpace(sc.Text()); t != "" {
					fmt.Fprintln(g.stdout, api.HashToken(t))
				}
			}
			if err := sc.Err(); err != nil {
				return &exitError{code: ExitFailed, err: err}
			}
			return nil
		},
	})
	return cmd
}
