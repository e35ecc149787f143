package agentpay

// Sending ACP order webhooks (the rules of what is sent and when:
// acp_webhooks.go): one try per call of the deliver_acp_order_event job.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/acporderevent"
	"agentpay/internal/webhooksend"
)

// ACPOrderDelivery is what one DeliverACPOrderEvent call did.
type ACPOrderDelivery struct {
	Status acporderevent.Status
	Tries  int
	// Sent: a try was made (Err says how it went).
	Sent bool
	// Done: no further try will be made.
	Done bool
	// Waiting: an earlier event of the same session is still pending, so
	// nothing was sent and no try counted; ask again later.
	Waiting bool
	// RetryAt is the next try's time after a failed one, when not Done.
	RetryAt time.Time
	Err     error
}

// ACPOrderWaitDelay is how long an event waits for the session's earlier
// one before it asks again.
const ACPOrderWaitDelay = 5 * time.Second

var (
	errNoACPWebhookURL    = errors.New("not sent: the ACP webhook URL of this mode was removed; set one and the next retry goes there")
	errNoACPWebhookSecret = errors.New("not sent: this mode has no ACP webhook secret")
)

// DeliverACPOrderEvent makes one try of a pending ACP order event: POST its
// stored body to the mode's ACP webhook URL of the moment, signed now with
// the mode's secret, and record the try. A done event is left alone (Done);
// an event whose session has an earlier one pending waits (Waiting). The
// error is for failures before any try (unknown event: ErrNotFound;
// database or vault errors).
func (s *Service) DeliverACPOrderEvent(ctx context.Context, id uuid.UUID) (ACPOrderDelivery, error) {
	e, err := s.cfg.DB.Ent.ACPOrderEvent.Get(ctx, id)
	if ent.IsNotFound(err) {
		return ACPOrderDelivery{}, fmt.Errorf("%w: ACP order event %s", ErrNotFound, id)
	}
	if err != nil {
		return ACPOrderDelivery{}, err
	}
	res := ACPOrderDelivery{Status: e.Status, Tries: e.Attempts}
	if e.Status != acporderevent.StatusPending {
		res.Done = true
		return res, nil
	}
	earlier, err := s.cfg.DB.Ent.ACPOrderEvent.Query().Where(acporderevent.SessionID(e.SessionID),
		acporderevent.SeqLT(e.Seq), acporderevent.StatusEQ(acporderevent.StatusPending)).Exist(ctx)
	if err != nil {
		return ACPOrderDelivery{}, err
	}
	if earlier {
		res.Waiting = true
		return res, nil
	}
	m, err := s.cfg.DB.Ent.Merchant.Get(ctx, e.MerchantID)
	if err != nil {
		return ACPOrderDelivery{}, err
	}
	mode := sessionModeOf(e.Livemode)
	ep := acpEndpointOf(m, mode)
	at := s.now()
	var code int
	var sendErr error
	switch {
	case ep.url == "":
		sendErr = errNoACPWebhookURL
	case len(ep.secret) == 0:
		sendErr = errNoACPWebhookSecret
	default:
		secret, err := s.cfg.Vault.Open(ep.secret, acpSecretAD(m.ID, mode))
		if err != nil {
			return ACPOrderDelivery{}, fmt.Errorf("agentpay: opening the %s ACP webhook secret of merchant %s: %w", mode, m.ID, err)
		}
		code, sendErr = webhooksend.Post(ctx, s.webhookClient(e.Livemode), webhooksend.Request{
			URL: ep.url, Payload: e.Payload, Sign: acpSignature(e, string(secret), at),
		})
		res.Sent = true
	}
	if ctx.Err() != nil {
		return ACPOrderDelivery{}, ctx.Err() // stopped mid-try: not counted
	}
	now := s.now().UTC()
	try := e.Attempts + 1
	res.Tries, res.Err = try, sendErr
	delays := s.webhookRetryDelays()
	u := s.cfg.DB.Ent.ACPOrderEvent.Update().
		Where(acporderevent.ID(e.ID), acporderevent.StatusEQ(acporderevent.StatusPending), acporderevent.Attempts(e.Attempts)).
		SetAttempts(try)
	if code != 0 {
		u.SetLastStatusCode(code)
	}
	switch {
	case sendErr == nil:
		res.Status, res.Done = acporderevent.StatusSucceeded, true
		u.SetStatus(res.Status).SetLastError("").SetCompletedAt(now).ClearNextAttemptAt()
	case try > len(delays):
		res.Status, res.Done = acporderevent.StatusFailed, true
		u.SetStatus(res.Status).SetLastError(truncateUTF8(sendErr.Error(), webhookErrorMax)).SetCompletedAt(now).ClearNextAttemptAt()
	default:
		res.RetryAt = now.Add(delays[try-1])
		u.SetLastError(truncateUTF8(sendErr.Error(), webhookErrorMax)).SetNextAttemptAt(res.RetryAt)
	}
	n, err := u.Save(ctx)
	if err != nil {
		return ACPOrderDelivery{}, fmt.Errorf("agentpay: recording ACP order webhook try: %w", err)
	}
	if n == 0 {
		// Another run recorded this try first: its outcome stands.
		cur, err := s.cfg.DB.Ent.ACPOrderEvent.Get(ctx, e.ID)
		if err != nil {
			return ACPOrderDelivery{}, err
		}
		return ACPOrderDelivery{Status: cur.Status, Tries: cur.Attempts, Done: cur.Status != acporderevent.StatusPending,
			RetryAt: derefTime(cur.NextAttemptAt)}, nil
	}
	if sendErr != nil {
		s.logger.InfoContext(ctx, "ACP order webhook try failed", "event", e.ID, "try", try, "done", res.Done, "err", truncateUTF8(sendErr.Error(), webhookErrorMax))
	}
	return res, nil
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// acpSignature is the signing headers of a try of e at `at`: the
// Merchant-Signature, and the Request-Id and Timestamp ACP's webhook
// carries. Request-Id is the same on every try of the event: the
// receiver's key to drop a repeat (a try whose answer was lost is sent
// again).
func acpSignature(e *ent.ACPOrderEvent, secret string, at time.Time) func(http.Header) {
	return func(h http.Header) {
		h.Set(ACPSignatureHeader, ACPSignature(secret, at, e.Payload))
		h.Set("Request-Id", e.ID.String())
		h.Set("Timestamp", at.UTC().Format(time.RFC3339))
	}
}
