// Package jobs is the job-queue machinery between the rules and the
// worker: the River jobs the service enqueues in a state change's own
// transaction (the outbox, see agentpay's package doc), their queues, and
// what enqueues them. The rules (agentpay) insert these jobs; the worker
// (worker) runs them by calling the service back. Neither facade nor
// merchant sees them, so they are not part of agentpay's API. The worker's
// own periodic jobs (scans, expiry, settle_pending...) live in worker.
package jobs

import (
	"context"
	"database/sql"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Inserter enqueues background jobs in the caller's transaction: the job
// exists if and only if the state change that caused it commits. A
// *river.Client[*sql.Tx] satisfies it; API processes use an insert-only
// client, the worker its working one.
type Inserter interface {
	InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

const (
	// WebhookQueue is the River queue of webhook deliveries.
	WebhookQueue = "webhooks"
	// SettlementQueue is the River queue of settle_payment jobs: they wait
	// on chains, so they must not hold up scanning or webhook delivery.
	SettlementQueue = "settlement"
)

// DeliverWebhookArgs is the River job that sends one delivery.
type DeliverWebhookArgs struct {
	DeliveryID uuid.UUID `json:"delivery_id"`
	// MerchantID and Livemode are whose cap of tries in flight the delivery
	// counts against (agentpay.Service.WebhookSlotsFull), so a worker can
	// see it must wait before reading anything; zero in jobs enqueued
	// before they existed.
	MerchantID uuid.UUID `json:"merchant_id,omitzero"`
	Livemode   bool      `json:"livemode,omitempty"`
}

// Kind is the job kind.
func (DeliverWebhookArgs) Kind() string { return "deliver_webhook" }

// InsertOpts puts deliveries on their own queue, so slow receivers never
// hold up chain scanning or settlement.
func (DeliverWebhookArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: WebhookQueue}
}

// DeliverACPOrderEventArgs is the River job that sends one ACP order
// webhook (agentpay.Service.DeliverACPOrderEvent).
type DeliverACPOrderEventArgs struct {
	EventID uuid.UUID `json:"event_id"`
}

// Kind is the job kind.
func (DeliverACPOrderEventArgs) Kind() string { return "deliver_acp_order_event" }

// InsertOpts puts ACP order webhooks on the webhook queue with the
// merchant's own deliveries.
func (DeliverACPOrderEventArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: WebhookQueue}
}

// SettlePaymentArgs is the River job settling one payment.
type SettlePaymentArgs struct {
	PaymentID uuid.UUID `json:"payment_id"`
}

// Kind is the job kind.
func (SettlePaymentArgs) Kind() string { return "settle_payment" }

// InsertOpts keeps one settle job per payment waiting or running at a time
// (a completed one does not block the next try of a settlement that is
// still open).
func (SettlePaymentArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue: SettlementQueue,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
				rivertype.JobStateRetryable, rivertype.JobStateScheduled,
			},
		},
	}
}

// RecomputeTrustArgs is the River job recomputing one agent's trust score
// and tier (agentpay.Service.RecomputeTrust, idempotent, from the
// committed inputs), queued by a change of its inputs that keeps the
// recompute off its answer's path (an internal payment), only when the
// change moves the score. Not unique: River's uniqueness would let a
// running job, which may have read the inputs before the change
// committed, turn the next one away; two jobs store one score.
type RecomputeTrustArgs struct {
	AgentID uuid.UUID `json:"agent_id"`
}

// Kind is the job kind.
func (RecomputeTrustArgs) Kind() string { return "recompute_trust" }

// SettleBatchArgs is the River job paying (or forming, once due) the
// settlement batch of one merchant, paid chain and mode.
type SettleBatchArgs struct {
	MerchantID uuid.UUID `json:"merchant_id"`
	Livemode   bool      `json:"livemode"`
	Chain      string    `json:"chain"`
}

// Kind is the job kind.
func (SettleBatchArgs) Kind() string { return "settle_batch" }

// InsertOpts keeps one settle_batch job per merchant, chain and mode
// waiting or running at a time, on the settlement queue.
func (SettleBatchArgs) InsertOpts() river.InsertOpts {
	return SettlePaymentArgs{}.InsertOpts()
}

// MailQueue is the River queue of send_mail jobs: a slow or unreachable
// SMTP server must not hold up anything else.
const MailQueue = "mail"

// SendRefundArgs is the River job sending one refund
// (agentpay.Service.SendRefund).
type SendRefundArgs struct {
	RefundID uuid.UUID `json:"refund_id"`
}

// Kind is the job kind.
func (SendRefundArgs) Kind() string { return "send_refund" }

// InsertOpts runs refunds beside settlements (both are the treasury's
// transfers), one job per refund waiting or running at a time.
func (SendRefundArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue: SettlementQueue,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
				rivertype.JobStateRunning, rivertype.JobStateScheduled,
			},
		},
	}
}

// SweepPaymentArgs is the River job sweeping one held payment (late,
// over- or repeat payment, never settled) to the treasury
// (agentpay.Service.SweepHeldPayment).
type SweepPaymentArgs struct {
	PaymentID uuid.UUID `json:"payment_id"`
}

// Kind is the job kind.
func (SweepPaymentArgs) Kind() string { return "sweep_payment" }

// InsertOpts runs sweeps beside settlements (the treasury relays both),
// one job per payment waiting or running at a time.
func (SweepPaymentArgs) InsertOpts() river.InsertOpts {
	return SendRefundArgs{}.InsertOpts()
}

// SweepDustArgs is the River job sweeping the dust of one deposit
// address to the treasury once it is worth the gas
// (agentpay.Service.SweepDust).
type SweepDustArgs struct {
	DepositAddressID uuid.UUID `json:"deposit_address_id"`
}

// Kind is the job kind.
func (SweepDustArgs) Kind() string { return "sweep_dust" }

// InsertOpts runs dust sweeps beside the other sweeps, one job per
// address waiting or running at a time.
func (SweepDustArgs) InsertOpts() river.InsertOpts {
	return SendRefundArgs{}.InsertOpts()
}

// SendMailArgs is the River job that sends one outbox message
// (agentpay.Service.SendMail). It is retried with River's default backoff
// (about 25 tries over three weeks), so mail queued while the SMTP server
// is down goes out once it is back.
type SendMailArgs struct {
	MessageID uuid.UUID `json:"message_id"`
}

// Kind is the job kind.
func (SendMailArgs) Kind() string { return "send_mail" }

// InsertOpts puts mail on its own queue.
func (SendMailArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: MailQueue}
}
