// Package logctx carries the id of the request or job a piece of work
// belongs to in its context, and puts it on every log line written with
// that context: rest adds request_id to each request's context, worker adds
// job_id and job_kind to each job's, and cmd/agentpay wraps the process's
// log handler with Handler. Code below only has to log with its context
// (InfoContext and the like), which it already does to be cancellable.
package logctx

import (
	"context"
	"log/slog"
)

type ctxKey struct{}

// With returns ctx carrying attrs besides those it already carries.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(ctxKey{}).([]slog.Attr)
	all := make([]slog.Attr, 0, len(prev)+len(attrs))
	all = append(append(all, prev...), attrs...)
	return context.WithValue(ctx, ctxKey{}, all)
}

// Attrs are the attributes ctx carries.
func Attrs(ctx context.Context) []slog.Attr {
	if ctx == nil {
		return nil
	}
	a, _ := ctx.Value(ctxKey{}).([]slog.Attr)
	return a
}

// Handler adds the attributes of each record's context to the record.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if attrs := Attrs(ctx); len(attrs) > 0 {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name)}
}
