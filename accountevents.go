package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/accountevent"
	"agentpay/internal/statusbus"
)

// Account events tell an agent or a human user what another party did:
// a pairing requested or decided, a transfer received; and a user how
// their withdrawal ended, which the chain decides after the request. Each is a row
// (AccountEvent) written in the transaction of the change it reports, so
// none is lost or invented; its id is a sequence, so a reader asks for the
// events after the last one it saw (GET /agents/me/events?after=<id>).
// The same transaction publishes the id on the status bus, so the live
// subscriptions (agentEvents, viewerEvents) on every process hear of it on
// commit; a subscriber re-reads the list after its last id on every
// message, so a missed message delays an event but never drops it. A
// subscription lasts as long as the credential that opened it
// (livecredentials.go).

// Account event kinds.
const (
	// EventPairingRequested: an agent asked a user to pair (to the user).
	EventPairingRequested = "pairing.requested"
	// EventPairingApproved, EventPairingDenied, EventPairingRevoked: the
	// user, the consenting human or the agent decided (to the agent, and
	// to the user when another decided).
	EventPairingApproved = "pairing.approved"
	EventPairingDenied   = "pairing.denied"
	EventPairingRevoked  = "pairing.revoked"
	// EventPairingAwaitingConsent: the user accepted, but the agent has
	// another human already, whose consent the pairing waits for (to the
	// agent). EventPairingConsentRequested: that consent is asked (to each
	// of the agent's humans).
	EventPairingAwaitingConsent  = "pairing.awaiting_consent"
	EventPairingConsentRequested = "pairing.consent_requested"
	// EventTransferReceived: a transfer to the agent or user completed.
	EventTransferReceived = "transfer.received"
	// EventWithdrawalCompleted, EventWithdrawalFailed: the user's
	// withdrawal to an external address completed (both legs included) or
	// failed (nothing moved) (to the user).
	EventWithdrawalCompleted = "withdrawal.completed"
	EventWithdrawalFailed    = "withdrawal.failed"
	// EventRefundReceived: a merchant's refund of an agent's checkout
	// payment reached the agent's custodial wallet (to the agent and its
	// paired humans).
	EventRefundReceived = "refund.received"
)

// accountEventsTopic is the bus topic of account events, keyed by the
// party ("agent.<id>", "user.<id>"); the message is the event id.
const accountEventsTopic statusbus.Topic = "account_events"

// Party is whom an account event is for: an agent or a user.
type Party struct {
	AgentID *uuid.UUID
	UserID  *uuid.UUID
}

// AgentParty and UserParty name the two kinds of party.
func AgentParty(id uuid.UUID) Party { return Party{AgentID: &id} }

// UserParty is a human user as a party.
func UserParty(id uuid.UUID) Party { return Party{UserID: &id} }

func (p Party) key() string {
	if p.AgentID != nil {
		return "agent." + p.AgentID.String()
	}
	return "user." + p.UserID.String()
}

// AccountEvent is one event as its party reads it.
type AccountEvent struct {
	ID        int64
	Kind      string
	Data      json.RawMessage
	CreatedAt time.Time
}

// MaxAccountEventsPage is the most events one read answers.
const MaxAccountEventsPage = 100

// recordAccountEvent writes an event for a party in the caller's
// transaction and publishes its id on the bus (delivered on commit).
func (s *Service) recordAccountEvent(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, to Party, kind string, data any) error {
	body, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("account event %s: %w", kind, err)
	}
	ev, err := tx.AccountEvent.Create().
		SetNillableAgentID(to.AgentID).
		SetNillableUserID(to.UserID).
		SetKind(kind).
		SetData(string(body)).
		SetCreatedAt(s.now().UTC().Truncate(time.Microsecond)).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("account event %s: %w", kind, err)
	}
	if err := s.bus.Publish(ctx, sqlTx, accountEventsTopic, to.key(), strconv.FormatInt(ev.ID, 10)); err != nil {
		return fmt.Errorf("publishing account event: %w", err)
	}
	return nil
}

// AccountEvents lists a party's events after the id after (0: from the
// first), oldest first, at most limit (1 to MaxAccountEventsPage; nil
// means the most).
func (s *Service) AccountEvents(ctx context.Context, of Party, after int64, limit *int) ([]AccountEvent, error) {
	n := MaxAccountEventsPage
	switch {
	case of.AgentID == nil && of.UserID == nil:
		return nil, errors.New("account events: no party")
	case after < 0:
		return nil, Invalid("after", "must be an event id (0 or more)")
	case limit != nil && (*limit < 1 || *limit > MaxAccountEventsPage):
		return nil, Invalid("limit", "must be from 1 to %d", MaxAccountEventsPage)
	case limit != nil:
		n = *limit
	}
	rows, err := of.events(s.cfg.DB.Ent).Where(accountevent.IDGT(after)).Order(ent.Asc(accountevent.FieldID)).Limit(n).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading account events: %w", err)
	}
	out := make([]AccountEvent, len(rows))
	for i, r := range rows {
		out[i] = AccountEvent{ID: r.ID, Kind: r.Kind, Data: json.RawMessage(r.Data), CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// WatchAgentEvents sends an agent's events (watchAccountEvents) for as
// long as the API key it authenticated with holds: regenerating it ends
// the watch (livecredentials.go).
func (s *Service) WatchAgentEvents(ctx context.Context, a *ent.Agent, after *int64) (<-chan AccountEvent, error) {
	return s.watchAccountEvents(ctx, AgentParty(a.ID), s.agentKeyHolds(a), after)
}

// WatchViewerEvents sends a signed-in user's events (watchAccountEvents)
// for as long as the browser session holds: signing it out, revoking it
// or its expiry ends the watch (livecredentials.go).
func (s *Service) WatchViewerEvents(ctx context.Context, v *Viewer, after *int64) (<-chan AccountEvent, error) {
	return s.watchAccountEvents(ctx, UserParty(v.User.ID), s.viewerHolds(v), after)
}

// watchAccountEvents sends a party's events after the id after (nil: only
// those committed from now on), then each new one as it is committed, on
// any process, until ctx ends or the credential the party presented does
// (holds): the feeds' one watch loop, watchFeed.
func (s *Service) watchAccountEvents(ctx context.Context, of Party, holds credentialCheck, after *int64) (<-chan AccountEvent, error) {
	if after != nil && *after < 0 {
		return nil, Invalid("after", "must be an event id (0 or more)")
	}
	return watchFeed(ctx, s, feedWatch[AccountEvent]{
		name: "account events", topic: accountEventsTopic, key: of.key(), holds: holds,
		start: func(ctx context.Context) (int64, error) {
			if after != nil {
				return *after, nil
			}
			return s.lastAccountEventID(ctx, of)
		},
		page: func(ctx context.Context, last int64) ([]AccountEvent, error) {
			return s.AccountEvents(ctx, of, last, nil)
		},
		pageSize: MaxAccountEventsPage,
		cursor:   func(e AccountEvent) int64 { return e.ID },
	})
}

// events selects the party's events.
func (p Party) events(db *ent.Client) *ent.AccountEventQuery {
	if p.AgentID != nil {
		return db.AccountEvent.Query().Where(accountevent.AgentID(*p.AgentID))
	}
	return db.AccountEvent.Query().Where(accountevent.UserID(*p.UserID))
}

// lastAccountEventID is the id of the party's newest event (0: none).
func (s *Service) lastAccountEventID(ctx context.Context, of Party) (int64, error) {
	ids, err := of.events(s.cfg.DB.Ent).Order(ent.Desc(accountevent.FieldID)).Limit(1).IDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading account events: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return ids[0], nil
}
