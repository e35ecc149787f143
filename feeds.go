package agentpay

import (
	"context"
	"errors"
	"fmt"

	"agentpay/internal/statusbus"
)

// feedWatch is one feed a watch follows: a list with increasing cursors,
// whose writers publish on a bus topic in the transaction that adds a line
// (account events, the merchant feed).
type feedWatch[T any] struct {
	// name names the feed in the logs and the credential recheck.
	name string
	// topic and key are what wakes the watch (statusbus).
	topic statusbus.Topic
	key   string
	// holds is the credential the caller presented: the watch ends with it
	// (livecredentials.go).
	holds credentialCheck
	// start is the cursor to read after first, read once subscribed.
	start func(ctx context.Context) (int64, error)
	// page reads the lines after a cursor, oldest first, at most pageSize.
	page     func(ctx context.Context, after int64) ([]T, error)
	pageSize int
	cursor   func(T) int64
}

// watchFeed sends the feed's lines after w.start, then each new one as it
// is committed, on any process, until ctx ends or the credential does. It
// subscribes before reading, so no line committed after the read is
// missed; each wake-up (a bus message, or a resync) reads everything after
// the last line sent, a page at a time, so lines arrive in order and none
// is skipped or repeated; the credential is checked again after each read
// and while waiting. The one watch loop of every feed.
func watchFeed[T any](ctx context.Context, s *Service, w feedWatch[T]) (<-chan T, error) {
	ctx, cancel := context.WithCancel(ctx)
	wake, err := s.bus.Subscribe(ctx, w.topic, w.key)
	if errors.Is(err, statusbus.ErrNoListener) {
		err = fmt.Errorf("%w: events %w", ErrUnavailable, err)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	last, err := w.start(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan T, w.pageSize)
	cred := s.recheckCredential(ctx, w.name, w.holds)
	go func() {
		defer cancel()
		defer close(out)
		for {
			for {
				items, err := w.page(ctx, last)
				if cred.ended(ctx) {
					return
				}
				if err != nil {
					if ctx.Err() == nil {
						s.logger.WarnContext(ctx, w.name+" watch: reading", "feed", w.key, "err", err)
					}
					break
				}
				for _, it := range items {
					select {
					case out <- it:
						last = w.cursor(it)
					case <-ctx.Done():
						return
					}
				}
				if len(items) < w.pageSize {
					break
				}
			}
			if !cred.wait(ctx, wake) {
				return
			}
		}
	}()
	return out, nil
}
