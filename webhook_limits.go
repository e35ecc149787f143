package agentpay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/internal/gate"
	"agentpay/internal/ratelimit"
)

// How much of the delivery machinery one merchant may use. Every merchant
// shares the webhook workers, and anyone can register one, so a receiver
// that never answers, or a merchant redelivering in a loop, must not delay
// anyone else's deliveries:
//
//   - Tries in flight: at most Config.WebhookMerchantConcurrency per
//     merchant and mode at once in each worker process (enterWebhookSlot).
//     Live and test mode are counted apart, so a hanging test receiver
//     never holds up live events. A delivery that finds its merchant at the
//     cap waits in the process up to webhookGateWait for a try to end, if
//     fewer than the cap already wait, so a busy merchant whose receiver
//     answers quickly keeps its slots full; otherwise it sends nothing and
//     is asked again after WebhookBusyWait (the worker snoozes its job): it
//     is not a failed try. A try holds its place while its receiver has it,
//     not while it is recorded (the database's time, not the receiver's:
//     DeliverWebhook). One merchant and mode so occupy at most twice the
//     cap of a process's webhook workers (WebhookWorkersPerMerchant). The
//     cap is the process's, not counted across worker processes: what it
//     protects is each process's shared workers, which it does alone; a
//     receiver sees at most the cap times the number of worker processes.
//   - Many merchants: the cap bounds one merchant, and anyone can register
//     many. So a receiver not known to answer in this process gets one try
//     at a time, and receivers that are slow share Config.
//     WebhookSlowConcurrency tries at once (the slow lane), a try that
//     reaches WebhookSlowAfter taking a place there or being ended
//     (webhook_receivers.go). A worker refuses to start with no more
//     workers than the lane and one merchant's share, so receivers that
//     answer always have workers.
//   - Redeliveries: RedeliveriesPerEvent of one event and
//     RedeliveriesPerMerchant per merchant and mode, each per clock hour
//     (allowRedelivery); test events (SendTestWebhook)
//     TestWebhooksPerMerchant per merchant and mode per clock hour
//     (allowTestWebhook); beyond, ErrRateLimited with the time to wait.
//   - One try: WebhookTimeout, and the answer's headers and body are read
//     only up to a bound (webhook.MaxResponseHeaderBytes, webhooksend.BodyMax).

const (
	// DefaultWebhookMerchantConcurrency is the cap on one merchant's tries
	// in flight per mode when Config.WebhookMerchantConcurrency is 0: a
	// receiver answering in 100 ms still takes 100 deliveries a second,
	// while one that hangs holds at most this many workers, each for
	// WebhookTimeout.
	DefaultWebhookMerchantConcurrency = 10
	// WebhookRunTimeout bounds one run of a delivery job: its wait for a
	// slot (webhookGateWait), its try (WebhookTimeout) and recording it.
	WebhookRunTimeout = WebhookTimeout + 20*time.Second
	// RedeliveriesPerEvent is how many redeliveries of one event are
	// accepted per clock hour: enough to retry by hand while fixing a
	// receiver, not a loop.
	RedeliveriesPerEvent = 10
	// RedeliveriesPerMerchant is how many redeliveries one merchant's
	// events get per mode and clock hour, all events together: each
	// redelivery is up to len(WEBHOOK_RETRY_DELAYS)+1 requests to a URL the
	// merchant chose.
	RedeliveriesPerMerchant = 100
	// TestWebhooksPerMerchant is how many test events (sendTestWebhook)
	// one merchant may send per mode and clock hour: a developer checking
	// a receiver sends a few; each is up to len(WEBHOOK_RETRY_DELAYS)+1
	// requests to a URL the merchant chose, from the workers every merchant
	// shares.
	TestWebhooksPerMerchant = 20
)

// webhookBusyDelays bound WebhookBusyDelay: the first wait and the longest.
const (
	webhookBusyFirst = 100 * time.Millisecond
	webhookBusyMax   = 5 * time.Second
)

// webhookGateWait is the longest a delivery waits in its process for one of
// its merchant's tries to end: long enough to follow a receiver that
// answers in a second, short enough that the workers waiting on one that
// hangs are soon free.
const webhookGateWait = time.Second

func webhookMerchantConcurrency(cfg Config) int {
	if cfg.WebhookMerchantConcurrency > 0 {
		return cfg.WebhookMerchantConcurrency
	}
	return DefaultWebhookMerchantConcurrency
}

func (s *Service) webhookMerchantConcurrency() int { return webhookMerchantConcurrency(s.cfg) }

// WebhookWorkersPerMerchant is how many of a process's webhook workers one
// merchant and mode occupy at most: the cap trying, as many waiting. A
// worker needs more than that, or one merchant could hold all of it.
func (s *Service) WebhookWorkersPerMerchant() int { return 2 * s.webhookMerchantConcurrency() }

// webhookGateKey is what the cap counts: a merchant's tries in one mode.
type webhookGateKey struct {
	merchantID uuid.UUID
	livemode   bool
}

// newWebhookGates are a process's gates of the cap: as many waiting as
// trying.
func newWebhookGates(cfg Config) *gate.Gates[webhookGateKey] {
	n := webhookMerchantConcurrency(cfg)
	return gate.New[webhookGateKey](n, n)
}

// enterWebhookSlot takes a place among this process's tries of the
// merchant in mode, as its receiver's class allows (webhook_receivers.go):
// a new receiver's one try, a proven one's cap (waiting for a place if
// needed, see the top of this file), a slow one's place in the slow lane
// and under its cap. false: none came free, nothing is held. A true
// enterWebhookSlot is followed by one leaveWebhookSlot once the try is
// recorded; the try is sent with tryCtx, which ends it at
// WebhookSlowAfter when the lane has no place for it (errWebhookCut).
func (s *Service) enterWebhookSlot(ctx context.Context, merchantID uuid.UUID, livemode bool) (slot *webhookSlot, tryCtx context.Context, ok bool) {
	key := webhookGateKey{merchantID: merchantID, livemode: livemode}
	class, inLane := s.webhookReceivers.admit(key)
	switch class {
	case receiverSlow:
		if !inLane {
			return nil, nil, false
		}
		if !s.webhookGates.EnterUnder(ctx, key, s.webhookMerchantConcurrency(), 0) {
			s.webhookReceivers.leaveLane()
			return nil, nil, false
		}
	case receiverNew:
		if !s.webhookGates.EnterUnder(ctx, key, 1, 0) {
			return nil, nil, false
		}
	default:
		if !s.webhookGates.Enter(ctx, key, webhookGateWait) {
			return nil, nil, false
		}
	}
	slot = &webhookSlot{key: key, r: s.webhookReceivers, inLane: inLane}
	return slot, slot.start(ctx), true
}

// leaveWebhookSlot gives up the places of a try enterWebhookSlot let in.
func (s *Service) leaveWebhookSlot(slot *webhookSlot) {
	slot.end()
	slot.cancel(nil)
	s.webhookGates.Leave(slot.key)
}

// WebhookSlotsFull reports whether a delivery of the merchant in mode would
// now be turned away in this process (enterWebhookSlot): a new receiver's
// try is in flight; a proven one's cap of tries are in flight here and as
// many deliveries wait; a slow one's lane is full or its cap in flight. A
// hint for the worker, so a delivery that must wait costs no database
// read; DeliverWebhook decides.
func (s *Service) WebhookSlotsFull(merchantID uuid.UUID, livemode bool) bool {
	key := webhookGateKey{merchantID: merchantID, livemode: livemode}
	switch s.webhookReceivers.class(key) {
	case receiverSlow:
		return s.webhookReceivers.laneFull() || s.webhookGates.Holders(key) >= s.webhookMerchantConcurrency()
	case receiverNew:
		return s.webhookGates.Holders(key) >= 1
	}
	return s.webhookGates.Full(key)
}

// WebhookSlowConcurrency is how many tries to slow receivers a process
// holds at once (Config.WebhookSlowConcurrency, its default).
func (s *Service) WebhookSlowConcurrency() int { return s.webhookReceivers.lane }

// WebhookBusyWait is how long a delivery of the merchant in mode turned away
// at its cap waits before asking again, when it has already waited waits
// times: for a proven receiver (webhook_receivers.go), its turn in this
// process's queue of the merchant's deliveries turned away, paced by how
// fast the receiver takes them (busyTurn); for others, WebhookBusyDelay.
// The delivery waits out of the worker's pool (the worker snoozes its job,
// which stays in the database: nothing waiting is lost with the process).
func (s *Service) WebhookBusyWait(merchantID uuid.UUID, livemode bool, waits int) time.Duration {
	key := webhookGateKey{merchantID: merchantID, livemode: livemode}
	if d, ok := s.webhookReceivers.busyTurn(key, s.webhookMerchantConcurrency()); ok {
		return d
	}
	return WebhookBusyDelay(waits)
}

// WebhookBusyDelay is how long a delivery whose merchant is at its cap
// waits before asking again, when it has already waited waits times: from
// 100 ms, doubling each time, at most 5 s, each a random point in its upper
// half. Short at first, so a busy merchant whose receiver answers quickly
// loses little; growing, so the waiting deliveries of a receiver that hangs
// cost the workers little; random, so they do not all come back at once.
func WebhookBusyDelay(waits int) time.Duration {
	d := webhookBusyMax
	if waits >= 0 && waits < 6 {
		d = min(webhookBusyFirst<<waits, webhookBusyMax)
	}
	return d/2 + rand.N(d/2+1)
}

// redeliveryLimits count redeliveries (allowRedelivery) and test events
// (allowTestWebhook).
type redeliveryLimits struct {
	event    *ratelimit.Limit[uuid.UUID]
	merchant *ratelimit.Limit[string]
	tests    *ratelimit.Limit[string]
}

func newRedeliveryLimits(limiter *ratelimit.Limiter) redeliveryLimits {
	hour := func(limit int) func(string) []ratelimit.Window {
		return func(string) []ratelimit.Window {
			return []ratelimit.Window{{Name: "hour", Seconds: 3600, Limit: limit}}
		}
	}
	return redeliveryLimits{
		event:    ratelimit.NewLimit[uuid.UUID](limiter, ratelimit.Scheme{Name: "redeliver_event", IDType: "uuid", Windows: hour(RedeliveriesPerEvent)}, nil),
		merchant: ratelimit.NewLimit[string](limiter, ratelimit.Scheme{Name: "redeliver_merchant", IDType: "text", Windows: hour(RedeliveriesPerMerchant)}, nil),
		tests:    ratelimit.NewLimit[string](limiter, ratelimit.Scheme{Name: "test_webhook_merchant", IDType: "text", Windows: hour(TestWebhooksPerMerchant)}, nil),
	}
}

// allowTestWebhook counts one test event of the merchant in mode against
// TestWebhooksPerMerchant a clock hour; a refusal is a *RateLimitError.
func (s *Service) allowTestWebhook(ctx context.Context, merchantID uuid.UUID, mode Mode) error {
	dec, err := s.rates.redeliveries.tests.Allow(ctx, ratelimit.Subject[string]{ID: merchantID.String() + "/" + string(mode)})
	return rateRefusal(dec, err, "test events", fmt.Sprintf(" of one merchant in %s mode", mode))
}

// allowRedelivery counts one redelivery of ev against its event's and its
// merchant's (in ev's mode) hourly limits; a refusal is a *RateLimitError.
func (s *Service) allowRedelivery(ctx context.Context, ev *ent.WebhookEvent) error {
	dec, err := s.rates.redeliveries.event.Allow(ctx, ratelimit.Subject[uuid.UUID]{ID: ev.ID})
	if err := rateRefusal(dec, err, "redeliveries", " of one event"); err != nil {
		return err
	}
	mode := ModeTest
	if ev.Livemode {
		mode = ModeLive
	}
	dec, err = s.rates.redeliveries.merchant.Allow(ctx, ratelimit.Subject[string]{ID: ev.MerchantID.String() + "/" + string(mode)})
	return rateRefusal(dec, err, "redeliveries", fmt.Sprintf(" of one merchant's %s events", mode))
}
