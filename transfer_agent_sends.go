package agentpay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
	"agentpay/internal/idempotency"
	"agentpay/internal/store"
)

// Agent-to-agent sends (spec 2.3, design.md 3).
//
// A send is two on-chain USDC transfers from the sender's custodial wallet on
// one chain: amount - fee to the recipient's wallet on that chain, fee to
// the treasury. Each leg has its own random 32-byte ref (the EIP-3009 nonce
// on EVM chains, a reference account on Solana), and both refs are written
// in the Transfer row (status pending) before anything is broadcast; the
// hashes are written once broadcast (submitted); the row is completed, and
// the agents' counters updated, once both legs are included. A crash at any
// point leaves a row the reconciler (treasury_reconcile.go) can finish without paying
// twice.

// FeeRateDivisor: the treasury fee is 1/1000 (0.1%) of the amount.
const FeeRateDivisor = 1000

// FeeRate is the treasury fee as a fraction, for display.
var FeeRate = decimal.New(1, -3)

// MinSendUSD is the smallest amount an agent can send.
var MinSendUSD = decimal.New(1, -2)

// DefaultSendWait is how long Send waits for both legs to be included
// before answering with the transfer still pending (the worker finishes it).
const DefaultSendWait = 30 * time.Second

// sendChainOrder is the order in which a send without a chain looks for a
// chain whose balance covers it (design.md 3: solana, then base). Agents'
// custodial wallets exist on these chains only.
var sendChainOrder = []chains.Name{chains.Solana, chains.Base}

// TransferFee is the treasury fee of a send of amount base units: 0.1%
// rounded to the nearest base unit, halves up (0.0005 USDC and more rounds
// up to 0.001). So a send of 50 USDC pays 0.05, and one of 0.012345 USDC
// (12,345 units) pays 12 units. The minimum send (0.01 USDC, 10,000 units)
// pays 10 units: the fee is never zero.
func TransferFee(amount int64) int64 {
	return (amount + FeeRateDivisor/2) / FeeRateDivisor
}

// SendRequest is an agent's send (POST /agents/me/wallet/send), or its
// send to a human user (POST /agents/me/wallet/send-to-user).
type SendRequest struct {
	ToUsername string
	// ToUser: ToUsername names a human user (send-to-user), not an agent.
	// Every other rule is the same.
	ToUser    bool
	AmountUSD decimal.Decimal
	Memo      string
	// Chain is optional: "" picks the first of solana, base whose available
	// balance covers the amount.
	Chain string
	// Wait bounds how long Send waits for inclusion; 0 means
	// DefaultSendWait. A send not included by then is answered pending.
	Wait time.Duration

	// IdempotencyKey makes the send safe to retry (Send): nil runs it
	// without one.
	IdempotencyKey *string

	// claim is the key's claim the send runs under, linked to the
	// transfer in the transaction that records it; its key and
	// fingerprint are kept on a held send.
	claim *idempotency.Claim
	// approved: the send runs on a human's approval of its held request
	// (agent_spend_decisions.go); only the policies' caps apply.
	approved *approvedRun
}

// operation names the request kind for its Idempotency-Key: a key used
// for a send cannot be replayed as a send-to-user.
func (r SendRequest) operation() string {
	if r.ToUser {
		return "send_to_user"
	}
	return "send"
}

// SendResult is a send as answered to the agent.
type SendResult struct {
	Transfer                 *ent.Transfer
	FromUsername, ToUsername string
	Chain                    chains.Name
	// Amount is what the sender is debited, Delivered what the recipient
	// receives (Amount - Fee), Fee what the treasury receives.
	Amount, Delivered, Fee decimal.Decimal
	// TxHash is the hash of the transfer to the recipient ("" while not yet
	// broadcast); FeeTxHash that of the fee to the treasury.
	TxHash, FeeTxHash string
	// Status is completed, or pending when inclusion took longer than the
	// wait (the transfer row may be pending or submitted), or
	// awaiting_approval when a spending policy held the send (Approval
	// set, Transfer nil).
	Status   string
	Message  string
	Approval *SpendApprovalView
}

func waitOrDefault(wait time.Duration) time.Duration {
	if wait <= 0 {
		return DefaultSendWait
	}
	return wait
}

// outgoing is a transfer about to be recorded from a custodial wallet, of
// one of the kinds of transfer_kinds.go (an agent's send, a user's
// withdrawal...), its request already validated.
type outgoing struct {
	// kind is what the transfer is for (transfer_kinds.go): it decides
	// its fee leg and what its completion and failure do.
	kind transfer.Kind
	from holder
	// to is the recipient party, paid at its custodial wallet on the
	// chosen chain; none for a withdrawal, which pays external.
	to holder
	// external is a withdrawal's destination on each candidate chain (the
	// address in that chain's canonical form).
	external map[chains.Name]string
	// candidates are the chains to try, in order: the first whose
	// available balance covers units is used.
	candidates []chains.Name
	units      int64
	// amount is units as requested (its refusals quote it as written).
	amount decimal.Decimal
	memo   string
	// underLock checks the sender's rules that need the wallet lock (the
	// daily limit: sends from the wallet cannot be recorded meanwhile).
	underLock func(ctx context.Context, tx *ent.Tx) error
	// claim is the key's claim to link the transfer to (nil: none).
	claim *idempotency.Claim
	// checkoutSessionID is the session an agent's checkout payment pays
	// (agent_checkout.go); nil for any other transfer.
	checkoutSessionID *uuid.UUID
	// internal: an internal payment (settle_internal.go), completed in
	// the transaction that records it.
	internal bool
	// recorded runs in the transaction that records t, after it (the
	// session's side of a checkout payment; a card reservation moves its
	// request to approved there, so the two commit together or not at
	// all); its error rolls t back.
	recorded func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error
}

// recordTransfer records o as a pending transfer once its sender's
// available balance on a candidate chain covers it, under the sender's
// wallet lock (the no-overdraft rule of Send), and returns the row, not yet
// broadcast (startTransfer does that).
func (s *Service) recordTransfer(ctx context.Context, o *outgoing) (*ent.Transfer, error) {
	k, ok := transferKinds[o.kind]
	if !ok || !k.recordable(o) {
		return nil, fmt.Errorf("send: a transfer of kind %q cannot have these parties", o.kind)
	}
	var fee int64 // without a fee leg the recipient receives units
	if k.fee {
		fee = TransferFee(o.units)
	}
	var ref, feeRef [32]byte
	if _, err := rand.Read(ref[:]); err != nil {
		return nil, fmt.Errorf("send: random ref: %w", err)
	}
	if _, err := rand.Read(feeRef[:]); err != nil {
		return nil, fmt.Errorf("send: random ref: %w", err)
	}

	var t *ent.Transfer
	err := recordWithinBalance(ctx, s,
		func(ctx context.Context, db *ent.Client) (*sendPlan, error) { return s.planSend(ctx, db, o) },
		func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
			// The per-wallet lock: every custodial wallet of the sender, in
			// id order (one order for everyone, so two locks never
			// deadlock). Both are locked, not just the chosen one, because
			// the daily limit spans chains.
			if _, err := store.ForUpdate(s.cfg.DB, o.from.wallets(tx.Client()).
				Order(ent.Asc(wallet.FieldID))).All(ctx); err != nil {
				return fmt.Errorf("send: locking wallets: %w", err)
			}
			if o.underLock != nil {
				return o.underLock(ctx, tx)
			}
			return nil
		},
		func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, plan *sendPlan) error {
			if plan.chosen == nil {
				return plan.refusal(o.amount)
			}
			b := plan.chosen
			var err error
			t, err = tx.Transfer.Create().
				SetKind(o.kind).
				SetNillableFromAgentID(o.from.agentID).
				SetNillableFromUserID(o.from.userID).
				SetNillableToAgentID(o.to.agentID).
				SetNillableToUserID(o.to.userID).
				SetChain(string(b.chain)).
				SetFromAddress(b.from).
				SetToAddress(b.to).
				SetAmount(o.units).
				SetFee(fee).
				SetNet(o.units - fee).
				SetRef(ref[:]).
				SetFeeRef(feeRef[:]).
				SetNillableMemo(nonEmpty(o.memo)).
				SetNillableCheckoutSessionID(o.checkoutSessionID).
				Save(ctx)
			if err != nil {
				return fmt.Errorf("send: recording transfer: %w", err)
			}
			if o.recorded != nil {
				if err := o.recorded(ctx, tx, sqlTx, t); err != nil {
					return err
				}
			}
			return o.claim.Link(ctx, tx, t.ID)
		})
	if err != nil {
		return nil, err
	}
	s.observer().SendStatus(t.Chain, string(transfer.StatusPending))
	return t, nil
}

func validateSendAmount(amount decimal.Decimal) (int64, error) {
	u, err := ToBaseUnits("amount_usd", amount, USDCDecimals)
	if err != nil {
		return 0, err
	}
	if amount.LessThan(MinSendUSD) {
		return 0, Invalid("amount_usd", "must be at least %s", MinSendUSD.StringFixed(2))
	}
	if !u.IsInt64() {
		return 0, Invalid("amount_usd", "is too large")
	}
	return u.Int64(), nil
}

func agentChain(c chains.Name) bool {
	for _, a := range sendChainOrder {
		if a == c {
			return true
		}
	}
	return false
}

func walletOn(ws []*ent.Wallet, c chains.Name) *ent.Wallet {
	for _, w := range ws {
		if w.Chain == string(c) {
			return w
		}
	}
	return nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// failTransfer marks an in-flight transfer failed with the reason, and in
// the same transaction runs its kind's failed hook (a withdrawing user is
// told: withdrawal.failed).
func (s *Service) failTransfer(ctx context.Context, t *ent.Transfer, reason string) error {
	s.logger.WarnContext(ctx, "transfer failed", "transfer", t.ID, "chain", t.Chain, "reason", reason)
	k, err := kindOf(t)
	if err != nil {
		return err
	}
	failed := false // by this call (only one marks it)
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.Transfer.Update().
			Where(transfer.ID(t.ID), transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)).
			SetStatus(transfer.StatusFailed).
			SetError(reason).
			Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		failed = true
		if k.failed == nil {
			return nil
		}
		done := *t
		done.Status, done.Error = transfer.StatusFailed, reason
		return k.failed(s, ctx, tx, sqlTx, &done)
	})
	if err != nil {
		return fmt.Errorf("transfer %s: marking failed: %w", t.ID, err)
	}
	if failed {
		s.observer().SendStatus(t.Chain, string(transfer.StatusFailed))
	}
	return nil
}

// completeTransfer marks the transfer completed once both legs are
// included, and in the same transaction adds it to the counters of the
// agents taking part and runs its kind's completed hook (transfer_kinds.go:
// the recipient told by a transfer.received account event, a withdrawing
// user by withdrawal.completed, a checkout payment's payment recorded);
// then it recomputes the agents' trust. Users have no counters and no
// trust. Completing twice (the request and the worker racing) counts once:
// only the update that moves the row out of pending/submitted touches the
// counters and runs the hook.
func (s *Service) completeTransfer(ctx context.Context, t *ent.Transfer) (*ent.Transfer, error) {
	type change struct {
		id                   uuid.UUID
		sent, received, fees int64
	}
	var completed []change
	moved := false // completed by this call (only one completes it)
	k, err := kindOf(t)
	if err != nil {
		return nil, err
	}
	to, err := s.recipientOf(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("transfer %s: %w", t.ID, err)
	}
	from, err := s.senderOf(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("transfer %s: %w", t.ID, err)
	}
	c := &transferCompletion{from: from, to: to}
	if k.beforeCompleted != nil {
		k.beforeCompleted(s, ctx, t, c)
	}
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC()
		n, err := tx.Transfer.Update().
			Where(transfer.ID(t.ID), transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)).
			SetStatus(transfer.StatusCompleted).
			SetCompletedAt(now).
			ClearError().
			Save(ctx)
		if err != nil || n == 0 {
			return err
		}
		moved = true
		var changes []change
		if from.agentID != nil {
			changes = append(changes, change{id: *from.agentID, sent: t.Amount, fees: t.Fee})
		}
		if to.agentID != nil {
			changes = append(changes, change{id: *to.agentID, received: t.Net})
		}
		// Rows in id order, as everywhere agents are updated together.
		sort.Slice(changes, func(i, j int) bool { return changes[i].id.String() < changes[j].id.String() })
		for _, c := range changes {
			err := tx.Agent.UpdateOneID(c.id).
				AddTxCount(1).
				AddVolumeSent(c.sent).
				AddVolumeReceived(c.received).
				AddFeesPaid(c.fees).
				Exec(ctx)
			if err != nil {
				return fmt.Errorf("transfer %s: counters: %w", t.ID, err)
			}
		}
		completed = changes
		if k.completed == nil {
			return nil
		}
		done := *t
		done.Status, done.CompletedAt, done.Error = transfer.StatusCompleted, &now, ""
		c.ctx, c.tx, c.sqlTx, c.done = ctx, tx, sqlTx, &done
		return k.completed(s, c)
	})
	if err != nil {
		return nil, err
	}
	if moved {
		s.observer().SendStatus(t.Chain, string(transfer.StatusCompleted))
		// Both legs are included; the treasury relayed (EVM) or fee-paid
		// (Solana) each of them.
		if ledger, err := s.agentLedger(chains.Name(t.Chain)); err == nil {
			s.observeGas(ctx, s.cfg.AgentMode, ledger, t.TxHash, t.FeeTxHash)
		}
	}
	// Trust after the commit, not inside: RecomputeTrust locks the agent
	// row FOR UPDATE, which on PostgreSQL conflicts with the FOR KEY SHARE
	// that concurrent sends' inserts take on the same agent (foreign key),
	// a deadlock when done while this transaction holds the counters. It is
	// idempotent and reads the committed counters; a crash in between is
	// caught up by the next recompute (any profile read refreshes it).
	for _, c := range completed {
		if err := s.RecomputeTrust(ctx, c.id); err != nil {
			s.logger.WarnContext(ctx, "recompute trust after transfer", "agent", c.id, "err", err)
		}
	}
	return s.reload(ctx, t)
}

// transferEventData is the data of a transfer.received event.
type transferEventData struct {
	TransactionID uuid.UUID   `json:"transaction_id"`
	FromAgent     string      `json:"from_agent"`
	AmountUSD     json.Number `json:"amount_usd"` // a JSON number, exact
	Chain         string      `json:"chain"`
	TxHash        string      `json:"tx_hash"`
	Memo          string      `json:"memo,omitempty"`
}

// sendResult is the answer of a send.
func (s *Service) sendResult(t *ent.Transfer, fromUsername, toUsername string) *SendResult {
	r := &SendResult{
		Transfer:     t,
		FromUsername: fromUsername,
		ToUsername:   toUsername,
		Chain:        chains.Name(t.Chain),
		Amount:       USDCAmount(t.Amount),
		Delivered:    USDCAmount(t.Net),
		Fee:          USDCAmount(t.Fee),
		TxHash:       t.TxHash,
		FeeTxHash:    t.FeeTxHash,
		Status:       string(t.Status),
	}
	if t.Status == transfer.StatusSubmitted {
		// Broadcast but not included: to the agent it is pending all the
		// same (spec 2.3 shows completed; pending is the other answer).
		r.Status = string(transfer.StatusPending)
	}
	amount, delivered, fee := usd(r.Amount), usd(r.Delivered), usd(r.Fee)
	switch t.Status {
	case transfer.StatusCompleted:
		r.Message = fmt.Sprintf("Sent %s USDC to %s on %s: %s USDC delivered, %s USDC (0.1%% fee) routed to the treasury.",
			amount, toUsername, t.Chain, delivered, fee)
	case transfer.StatusFailed:
		r.Message = fmt.Sprintf("Send of %s USDC to %s on %s failed: %s", amount, toUsername, t.Chain, t.Error)
	default:
		r.Message = fmt.Sprintf("Send of %s USDC to %s on %s is pending on-chain inclusion: %s USDC will be delivered and %s USDC (0.1%% fee) routed to the treasury.",
			amount, toUsername, t.Chain, delivered, fee)
	}
	return r
}

// usd formats an amount with at least two decimals (50.00, 49.95, 0.012333).
func usd(d decimal.Decimal) string {
	if d.Equal(d.Round(2)) {
		return d.StringFixed(2)
	}
	return d.String()
}
