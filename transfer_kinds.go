package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
)

// Transfer kinds: what a transfer from a custodial wallet is for.
//
// A transfer's kind (transfers.kind) is set when it is recorded, from the
// caller that records it (Send, Withdraw, PayCheckout, a card approval),
// and never worked out again from which of its nullable columns are set.
// transferKinds is the one table of what differs between kinds: who is
// told what when a transfer is completed or fails, whether it carries the
// 0.1% fee leg, what the books and the gas ledger call it. completeTransfer,
// failTransfer, the reconciler (through the legs), the books and the gas
// tally dispatch on it. A new kind (a card refund, a payout from a
// custodial wallet) is a value of the schema's enum, one entry here and
// the file of its own rules; TestTransferKindsTable fails until the entry
// exists.
//
// Rows recorded before the column existed were given their kind by the
// transfer_kind migration from their columns (transferKindBackfill), by
// the rule transferKindOfParties states in Go; recordTransfer holds every
// new row to the same rule, so the two can never disagree (tested).

// transferKind is one kind's entry in transferKinds.
type transferKind struct {
	// fee: the transfer carries the 0.1% fee to the treasury as its own
	// leg (sends and withdrawals). A checkout payment's merchant pays the
	// settlement fee instead; a card reservation pays the treasury itself.
	fee bool
	// gasPurpose is what the gas ledger calls the amount leg (the fee leg
	// is GasPurposeSendFee for every kind that has one).
	gasPurpose string
	// internal: the transfer is a record only (settle_internal.go):
	// completed when recorded, no leg broadcast, no fee leg; the books
	// and the gas tally skip it (its payment's collection is the chain
	// movement), and it counts as in flight from its wallet until that
	// collection is included (walletSends).
	internal bool
	// paysDepositAddress: the amount leg pays a checkout session's deposit
	// address, whose record of it is the payment (checkout_deposits.go): the books
	// count the transfer on the sender's side only.
	paysDepositAddress bool
	// recordable says whether o has the parties this kind needs;
	// recordTransfer refuses to record one that does not (an internal
	// error: a caller's bug, never a client's).
	recordable func(o *outgoing) bool
	// beforeCompleted reads, before the transaction that completes the
	// transfer, what completed needs from outside the database (no RPC
	// call runs under the transaction's locks); nil: nothing.
	beforeCompleted func(s *Service, ctx context.Context, t *ent.Transfer, c *transferCompletion)
	// completed runs in the transaction that completes the transfer,
	// after its row moved to completed and the agents' counters were
	// added (only the call that completes it runs it): the events and
	// records that follow the money, committed with it. nil: nothing
	// follows at once (a card reservation's card comes by advanceCard).
	completed func(s *Service, c *transferCompletion) error
	// failed runs in the transaction that fails the transfer (only the
	// call that fails it runs it); nil: nobody is told at once (a card
	// request learns it from the cards job, advanceCard; an agent's
	// checkout payment from its next read).
	failed func(s *Service, ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error
}

// transferKinds: one entry per value of the schema's kind enum.
var transferKinds = map[transfer.Kind]transferKind{
	// An agent's send to another agent (transfer_agent_sends.go).
	transfer.KindSend: {
		fee: true, gasPurpose: GasPurposeSend,
		recordable: func(o *outgoing) bool {
			return o.from.agentID != nil && o.to.agentID != nil && o.checkoutSessionID == nil
		},
		completed: (*Service).tellRecipient,
	},
	// An agent's send to a human user's custodial wallet (transfer_agent_sends.go,
	// SendRequest.ToUser).
	transfer.KindSendToUser: {
		fee: true, gasPurpose: GasPurposeSend,
		recordable: func(o *outgoing) bool {
			return o.from.agentID != nil && o.to.userID != nil && o.checkoutSessionID == nil
		},
		completed: (*Service).tellRecipient,
	},
	// A human user's withdrawal to an external address (transfer_withdrawals.go).
	transfer.KindWithdrawal: {
		fee: true, gasPurpose: GasPurposeWithdrawal,
		recordable: func(o *outgoing) bool { return o.from.userID != nil && o.to.none() && o.checkoutSessionID == nil },
		completed: func(s *Service, c *transferCompletion) error {
			return s.recordAccountEvent(c.ctx, c.tx, c.sqlTx, c.from.party(), EventWithdrawalCompleted, withdrawalEventDataOf(c.done))
		},
		failed: func(s *Service, ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error {
			return s.recordAccountEvent(ctx, tx, sqlTx, UserParty(*t.FromUserID), EventWithdrawalFailed, withdrawalEventDataOf(t))
		},
	},
	// An agent's payment of a checkout session from its wallet
	// (agent_checkout.go): the session's payment is recorded with it.
	transfer.KindCheckoutPayment: {
		gasPurpose: GasPurposeAgentPay, paysDepositAddress: true,
		recordable: func(o *outgoing) bool {
			return o.from.agentID != nil && o.to.none() && o.checkoutSessionID != nil && !o.internal
		},
		beforeCompleted: func(s *Service, ctx context.Context, t *ent.Transfer, c *transferCompletion) {
			c.deposit = s.checkoutDepositOf(ctx, t)
		},
		completed: func(s *Service, c *transferCompletion) error {
			if c.deposit == nil {
				return nil // the deposit scan records the payment when it sees it
			}
			return s.recordCheckoutPayment(c.ctx, c.tx, c.sqlTx, c.done, *c.deposit)
		},
	},
	// An agent's payment of a checkout session settled on the internal
	// ledger (settle_internal.go): completed, with the session's
	// payment, in the transaction that records it. Its gas purpose is
	// never tallied (nothing is broadcast); its collection is a sweep.
	transfer.KindInternalPayment: {
		gasPurpose: GasPurposeAgentPay, internal: true,
		recordable: func(o *outgoing) bool {
			return o.from.agentID != nil && o.to.none() && o.checkoutSessionID != nil && o.internal
		},
	},
	// An agent's reservation of a card purchase's amount, paid to the
	// treasury (card_approvals.go); the card follows by advanceCard (card_lifecycle.go).
	transfer.KindCardReservation: {
		gasPurpose: GasPurposeCardReserve,
		recordable: func(o *outgoing) bool { return o.from.agentID != nil && o.to.none() && o.checkoutSessionID == nil },
	},
}

// kindOf is t's entry; a kind without one is an error (a row written by a
// newer release than this one).
func kindOf(t *ent.Transfer) (transferKind, error) {
	k, ok := transferKinds[t.Kind]
	if !ok {
		return transferKind{}, fmt.Errorf("transfer %s: unknown kind %q", t.ID, t.Kind)
	}
	return k, nil
}

// transferCompletion is what a kind's completed hook works with: the
// completing transaction and the transfer as completed.
type transferCompletion struct {
	ctx   context.Context
	tx    *ent.Tx
	sqlTx *sql.Tx
	// done is the transfer as it is once completed.
	done     *ent.Transfer
	from, to holder
	// deposit is a checkout payment's deposit, read from the chain before
	// the transaction (no RPC call under its locks); nil when it is none
	// or could not be read.
	deposit *chains.Deposit
}

// tellRecipient records the transfer.received event of the party a send
// paid.
func (s *Service) tellRecipient(c *transferCompletion) error {
	t := c.done
	return s.recordAccountEvent(c.ctx, c.tx, c.sqlTx, c.to.party(), EventTransferReceived, transferEventData{
		TransactionID: t.ID, FromAgent: c.from.username, AmountUSD: json.Number(USDCAmount(t.Net).String()), Chain: t.Chain,
		TxHash: t.TxHash, Memo: t.Memo,
	})
}

// transferKindOfParties is the kind a transfer's parties imply: the rule
// the transfer_kind migration gave older rows their kind by
// (transferKindBackfill says it in SQL), and which every kind's recordable
// agrees with for the rows recorded since.
func transferKindOfParties(fromUser, toAgent, toUser, checkoutSession bool) transfer.Kind {
	switch {
	case checkoutSession:
		return transfer.KindCheckoutPayment
	case fromUser:
		return transfer.KindWithdrawal
	case toAgent:
		return transfer.KindSend
	case toUser:
		return transfer.KindSendToUser
	default:
		// An agent's transfer to no party and no session: the treasury,
		// reserving a card purchase.
		return transfer.KindCardReservation
	}
}

// transferKindBackfill is transferKindOfParties over a transfers row, as
// the transfer_kind migration sets it (UPDATE transfers SET kind = ...).
const transferKindBackfill = `CASE` +
	` WHEN checkout_session_id IS NOT NULL THEN 'checkout_payment'` +
	` WHEN from_user_id IS NOT NULL THEN 'withdrawal'` +
	` WHEN to_agent_id IS NOT NULL THEN 'send'` +
	` WHEN to_user_id IS NOT NULL THEN 'send_to_user'` +
	` ELSE 'card_reservation' END`

// gasPurposeOfKind is the SQL expression of the gas purpose of the amount
// leg of the transfers row t, from the kinds' table.
func gasPurposeOfKind() string {
	kinds := make([]string, 0, len(transferKinds))
	for k := range transferKinds {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds) // one query text whatever the map's order
	var b strings.Builder
	b.WriteString("CASE t.kind")
	for _, k := range kinds {
		fmt.Fprintf(&b, " WHEN '%s' THEN '%s'", k, transferKinds[transfer.Kind(k)].gasPurpose)
	}
	b.WriteString(" END")
	return b.String()
}
