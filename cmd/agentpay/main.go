// Command agentpay runs the service: `dev` (everything on one machine),
// `serve` (the HTTP API), `worker` (the background jobs), `migrate` and
// `admin` (operator commands: adminCommands in admin.go lists them).
// Configuration comes from the environment, read only here.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"agentpay/internal/logctx"
)

const usage = `usage: agentpay <command>

commands:
  dev       everything in one process on the embedded defaults, with local devnets
  serve     the HTTP API (REST, GraphQL, pages)
  worker    chain scanning, confirmations, settlement, webhooks
  migrate   apply the database migrations
  admin     operator commands (agentpay admin lists them)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "agentpay:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("unknown command")

// run runs one command: what it prints goes to stdout, its logs to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return errUsage
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger := newLogger(cfg.LogLevel, cfg.LogFormat, stderr)
	switch args[0] {
	case "dev":
		return runDev(ctx, cfg, logger, stdout)
	case "serve":
		return runServe(ctx, cfg, logger)
	case "worker":
		return runWorker(ctx, cfg, logger)
	case "migrate":
		return runMigrate(ctx, cfg, logger)
	case "admin":
		return runAdmin(ctx, cfg, logger, args[1:], stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stdout, usage)
		return fmt.Errorf("%w %q", errUsage, args[0])
	}
}

// newLogger writes text (key=value) or JSON lines (LOG_FORMAT) at level
// and above; every line logged with a request's or a job's context carries
// its request_id or job_id (internal/logctx).
func newLogger(level, format string, w io.Writer) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(logctx.Handler(h))
}
