package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"agentpay/ent/checkoutsession"
	"agentpay/internal/statusbus"
)

// The live status of a checkout session (design.md section 1): every
// transaction that sets a session's status publishes it on the status bus
// (internal/statusbus), and the GraphQL sessionStatus subscription on every
// API process hears it once that transaction commits.

// sessionStatusTopic is the bus topic of session status changes, keyed by
// the session's external id; the message is the new status.
const sessionStatusTopic statusbus.Topic = "session_status"

// publishSessionStatus announces a session's new status from inside the
// transaction that changes it (sqlTx: WithTx's): subscribers on every
// process receive it after the commit, never after a rollback. Call it in
// every transaction that sets a session's status.
func (s *Service) publishSessionStatus(ctx context.Context, sqlTx *sql.Tx, externalID, status string) error {
	if err := s.bus.Publish(ctx, sqlTx, sessionStatusTopic, externalID, status); err != nil {
		return fmt.Errorf("publishing session status: %w", err)
	}
	s.statuses.dropOnCommit(ctx, sqlTx, externalID)
	return nil
}

// SessionStatusUpdate is one message of WatchSessionStatus.
type SessionStatusUpdate struct {
	ExternalID string
	CheckoutStatus
}

// WatchSessionStatus sends the session's payment status now, then again
// each time a change of its status is published, until ctx ends. The status
// sent is the published one; the other fields are read fresh. A message
// equal to the previous one is not repeated. An unknown session is
// ErrNotFound.
func (s *Service) WatchSessionStatus(ctx context.Context, externalID string) (<-chan SessionStatusUpdate, error) {
	ctx, cancel := context.WithCancel(ctx)
	// Subscribe before reading, so no change committed after the read is
	// missed.
	events, err := s.bus.Subscribe(ctx, sessionStatusTopic, externalID)
	if errors.Is(err, statusbus.ErrNoListener) {
		err = fmt.Errorf("%w: status %w", ErrUnavailable, err)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	first, err := s.CheckoutStatus(ctx, externalID, "")
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan SessionStatusUpdate, 1)
	last := SessionStatusUpdate{ExternalID: externalID, CheckoutStatus: *first}
	out <- last
	go func() {
		defer cancel()
		defer close(out)
		for ev := range events {
			st, err := s.CheckoutStatus(ctx, externalID, "")
			if err != nil {
				if ctx.Err() == nil {
					s.logger.WarnContext(ctx, "session status watch: reading status", "session", externalID, "err", err)
				}
				continue
			}
			if ev != statusbus.Resync {
				st.Status = checkoutsession.Status(ev)
			}
			next := SessionStatusUpdate{ExternalID: externalID, CheckoutStatus: *st}
			if sameStatus(next, last) {
				continue
			}
			select {
			case out <- next:
				last = next
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func sameStatus(a, b SessionStatusUpdate) bool {
	ra, rb := a.Required, b.Required
	return a.Status == b.Status && a.AmountPaid.Equal(b.AmountPaid) && a.Chain == b.Chain &&
		a.Token == b.Token && a.Confirmations == b.Confirmations &&
		(ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}
