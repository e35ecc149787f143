package worker

import (
	"context"
	"log/slog"
)

// quietHandler passes on only records at or above min: River reports job
// counts at info level every few seconds, which drowns the service's logs.
type quietHandler struct {
	slog.Handler
	min slog.Level
}

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietHandler{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{Handler: h.Handler.WithGroup(name), min: h.min}
}
