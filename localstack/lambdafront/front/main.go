package front

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// shutdownWait bounds the wait for invocations in progress at shutdown
// before their environments are stopped.
const shutdownWait = 5 * time.Second

// functionFlags collects repeated -function flags.
type functionFlags []Function

func (f *functionFlags) String() string { return fmt.Sprint(len(*f), " functions") }

func (f *functionFlags) Set(s string) error {
	fn, err := ParseFunction(s)
	if err != nil {
		return err
	}
	*f = append(*f, fn)
	return nil
}

// Main is the lambdafront command: it parses args, serves until SIGTERM or
// SIGINT, and returns the exit status. It logs to stderr.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("lambdafront", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var fns functionFlags
	addr := fs.String("addr", "127.0.0.1:0", "`address` to listen on (port 0: a free port)")
	addrFile := fs.String("addr-file", "", "write the front's base URL to this `file` once it listens")
	config := fs.String("config", "", "JSON config `file` with more functions: {\"functions\": [{\"name\", \"bootstrap\", \"memory_mb\", \"timeout\", \"concurrency\", \"env\"}]}")
	rie := fs.String("rie", "aws-lambda-rie", "the aws-lambda-rie `executable`")
	region := fs.String("region", envOr("AWS_REGION", "us-east-1"), "`region` in ARNs and the functions' AWS_REGION")
	account := fs.String("account", "123456789012", "`account` in ARNs")
	controlPlane := fs.String("control-plane", "", "proxy every other Lambda API request to this base `URL` (moto_server's)")
	level := fs.String("log-level", "info", "log `level`: debug (with aws-lambda-rie's own log), info (with the functions' output), warn or error")
	fs.Var(&fns, "function", "a function to serve (repeatable), as the `spec` name=NAME,bootstrap=PATH[,memory=MB][,timeout=DURATION][,concurrency=N][,env=K=V;K2=V2]")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lambdafront [flags]\n\nServes the AWS Lambda Invoke API in front of aws-lambda-rie processes.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lambdafront: unexpected arguments %q; functions are given with -function\n", fs.Args())
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "lambdafront: -log-level %q: want debug, info, warn or error\n", *level)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	if *config != "" {
		more, err := LoadConfig(*config)
		if err != nil {
			log.Error("cannot start", "err", err)
			return 2
		}
		fns = append(fns, more...)
	}
	f, err := New(Config{Functions: fns, RIE: *rie, Region: *region, Account: *account, ControlPlane: *controlPlane, Logger: log})
	if err != nil {
		log.Error("cannot start", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := serve(ctx, f, *addr, *addrFile, log); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	return 0
}

// serve serves f on addr until ctx ends, then stops f.
func serve(ctx context.Context, f *Front, addr, addrFile string, log *slog.Logger) error {
	defer f.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	url := "http://" + l.Addr().String()
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	if addrFile != "" {
		if err := writeFileAtomic(addrFile, url+"\n"); err != nil {
			srv.Close()
			return err
		}
	}
	log.Info("serving the Lambda Invoke API", "url", url, "functions", strings.Join(slices.Sorted(maps.Keys(f.pools)), ","))
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: stopping every aws-lambda-rie")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	srv.Shutdown(sctx)
	return nil
}

// writeFileAtomic writes data to path through a temporary file, so that a
// reader never sees it half written.
func writeFileAtomic(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return fmt.Errorf("write the address file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the address file: %w", err)
	}
	return nil
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
