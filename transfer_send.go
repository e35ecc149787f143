package agentpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/spendapproval"
	"agentpay/ent/transfer"
	"agentpay/internal/idempotency"
)

// An agent's send: its one entry point (Send), every decision that may
// refuse it (checkSend, and sendChecked.underLock under the wallet lock),
// and its run under an Idempotency-Key (sendOp). The transfer itself is
// recorded and broadcast by transfer_agent_sends.go.

// Send moves USDC from the agent's custodial wallet to another agent's
// wallet (or, with ToUser, a human user's) on the same chain, routing the
// 0.1% fee to the treasury; under req.IdempotencyKey when set (the one
// entry point of a send: internal/idempotency). replayed is true when the
// answer (result or error) is an earlier request's with the same key.
//
// Refusals, each changing nothing, in the order they are decided (the
// names are sendRefusals; TestSendRefusalsListed holds this list to the
// code):
//   - key: a malformed Idempotency-Key (ValidationError);
//   - key_reused: the key was used for another request
//     (ErrIdempotencyKeyReused, 422);
//   - key_in_progress: a request with the key still runs (ErrConflict);
//   - amount: below 0.01, more than 6 decimals, or too large
//     (ValidationError);
//   - chain: unknown, or one agents hold no wallet on (ValidationError);
//   - recipient_missing: no to_username (ValidationError);
//   - memo: over 500 bytes (ValidationError);
//   - per_send_limit: over the tier's per-send limit (ErrForbidden);
//   - recipient_unknown: no such agent or user (ErrNotFound);
//   - self: sending to yourself (ValidationError);
//   - policy: a spending policy refuses it (ErrForbidden; a policy that
//     holds it for approval is no refusal: the answer is the approval);
//   - minimum: below the chain's send minimum, or every chain's
//     (SEND_MINIMUM_USD; ValidationError);
//   - daily_limit: today's sends plus this one over the tier's daily limit
//     (ErrForbidden), under the wallet lock;
//   - daily_cap: over a spending policy's daily cap (ErrForbidden), under
//     the wallet lock;
//   - balance: available balance short on the chain, or on every
//     candidate chain (ErrInsufficientFunds).
//
// Available balance is the on-chain balance minus the sender's sends in
// flight on that chain. It is read before the send's transaction (no RPC
// call runs while the transaction holds its locks, and on SQLite every
// writer), then the transaction takes the sender's wallet rows locked
// (SELECT ... FOR UPDATE on PostgreSQL; SQLite's one connection and
// immediate transactions serialise it), checks that no send was recorded
// from the wallet since the read, and writes the pending row; so concurrent
// sends, from any number of API instances, never spend the same money twice
// (planSend says why). When sends were recorded meanwhile the balance is
// read again; after maxSendAttempts reads it is read under the lock, the
// one way to stop a stream of concurrent sends from the same wallet.
func (s *Service) Send(ctx context.Context, from *ent.Agent, req SendRequest) (res *SendResult, replayed bool, err error) {
	op, err := s.sendOp(from, req)
	if err != nil {
		return nil, false, refuse(refuseKey, err)
	}
	res, replayed, err = idempotency.Do(ctx, s.idem, op)
	switch {
	case replayed || err == nil:
	case errors.Is(err, idempotency.ErrKeyReused):
		err = refuse(refuseKeyReused, err)
	case errors.Is(err, idempotency.ErrInProgress):
		err = refuse(refuseKeyInProgress, err)
	}
	return res, replayed, err
}

// sendRefusal names one refusal of a send (Send's doc lists them).
type sendRefusal string

const (
	refuseKey              sendRefusal = "key"
	refuseKeyReused        sendRefusal = "key_reused"
	refuseKeyInProgress    sendRefusal = "key_in_progress"
	refuseAmount           sendRefusal = "amount"
	refuseChain            sendRefusal = "chain"
	refuseRecipientMissing sendRefusal = "recipient_missing"
	refuseMemo             sendRefusal = "memo"
	refusePerSendLimit     sendRefusal = "per_send_limit"
	refuseRecipientUnknown sendRefusal = "recipient_unknown"
	refuseSelf             sendRefusal = "self"
	refusePolicy           sendRefusal = "policy"
	refuseMinimum          sendRefusal = "minimum"
	refuseDailyLimit       sendRefusal = "daily_limit"
	refuseDailyCap         sendRefusal = "daily_cap"
	refuseBalance          sendRefusal = "balance"
)

// sendRefusals are every refusal of a send, in the order decided.
var sendRefusals = []sendRefusal{
	refuseKey, refuseKeyReused, refuseKeyInProgress, refuseAmount, refuseChain, refuseRecipientMissing, refuseMemo,
	refusePerSendLimit, refuseRecipientUnknown, refuseSelf, refusePolicy, refuseMinimum, refuseDailyLimit, refuseDailyCap,
	refuseBalance,
}

// refusedSend is a send's refusal: the error as answered (its text and
// kind unchanged), and which refusal it is.
type refusedSend struct {
	why sendRefusal
	err error
}

func (e *refusedSend) Error() string { return e.err.Error() }
func (e *refusedSend) Unwrap() error { return e.err }

// refuse names err as the refusal why (nil stays nil).
func refuse(why sendRefusal, err error) error {
	if err == nil {
		return nil
	}
	return &refusedSend{why: why, err: err}
}

// refusalOfSend is which refusal err is ("" for none).
func refusalOfSend(err error) sendRefusal {
	var r *refusedSend
	if errors.As(err, &r) {
		return r.why
	}
	return ""
}

// sendChecked is a send that passed every decision made before the wallet
// lock.
type sendChecked struct {
	units  int64
	chain  chains.Name // "" none asked for
	to     holder
	limits TierLimits
	policy SpendDecision
	// candidates are the chains to try (nil when the policy holds it).
	candidates []chains.Name
}

// checkSend makes every decision of a send made before the wallet lock,
// in Send's order; a policy that holds the send stops it there.
func (s *Service) checkSend(ctx context.Context, from *ent.Agent, req SendRequest) (*sendChecked, error) {
	units, err := validateSendAmount(req.AmountUSD)
	if err != nil {
		return nil, refuse(refuseAmount, err)
	}
	c := &sendChecked{units: units}
	if strings.TrimSpace(req.Chain) != "" {
		if c.chain, err = chains.ParseName(req.Chain); err != nil {
			return nil, refuse(refuseChain, Invalid("chain", "%s", err))
		}
		if !agentChain(c.chain) {
			return nil, refuse(refuseChain, Invalid("chain", "agents hold wallets on solana and base only, not %s", c.chain))
		}
	}
	if req.ToUsername == "" {
		return nil, refuse(refuseRecipientMissing, Invalid("to_username", "is required"))
	}
	if len(req.Memo) > 500 { // bytes, as the column's limit counts them
		return nil, refuse(refuseMemo, Invalid("memo", "must be at most 500 bytes"))
	}
	c.limits = LimitsFor(string(from.Tier))
	if req.AmountUSD.GreaterThan(c.limits.PerSend) {
		return nil, refuse(refusePerSendLimit, fmt.Errorf("%w: %s USD exceeds the per-send limit of %s USD of tier %s",
			ErrForbidden, req.AmountUSD, c.limits.PerSend, from.Tier))
	}
	if c.to, err = s.resolveRecipient(ctx, req); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, refuse(refuseRecipientUnknown, err)
		}
		return nil, err
	}
	if c.to.agentID != nil && *c.to.agentID == from.ID {
		return nil, refuse(refuseSelf, Invalid("to_username", "cannot send to yourself"))
	}
	names, err := s.recipientNames(ctx, c.to)
	if err != nil {
		return nil, err
	}
	c.policy, err = s.decideSpend(ctx, from, SpendOperation{Kind: req.operation(), Amount: units, Payee: names}, req.approved != nil)
	if err != nil {
		return nil, err
	}
	switch c.policy.Outcome {
	case SpendRefused:
		return nil, refuse(refusePolicy, c.policy.Err())
	case SpendHeld:
		return c, nil
	}
	candidates := sendChainOrder
	if c.chain != "" {
		candidates = []chains.Name{c.chain}
	}
	if c.candidates, err = s.withinSendMinimums(candidates, c.chain, req.AmountUSD); err != nil {
		return nil, refuse(refuseMinimum, err)
	}
	return c, nil
}

// underLock is the send's decisions that need the wallet lock (no send
// from the wallet can be recorded meanwhile): the tier's daily limit and
// the policies' daily cap.
func (c *sendChecked) underLock(s *Service, from *ent.Agent, req SendRequest) func(ctx context.Context, tx *ent.Tx) error {
	return func(ctx context.Context, tx *ent.Tx) error {
		sent, err := sentToday(ctx, tx.Transfer, agentHolder(from), s.now())
		if err != nil {
			return err
		}
		if USDCAmount(sent + c.units).GreaterThan(c.limits.Daily) {
			return refuse(refuseDailyLimit, fmt.Errorf("%w: %s USD exceeds the daily limit of %s USD of tier %s (%s USD already sent today)",
				ErrForbidden, req.AmountUSD, c.limits.Daily, from.Tier, USDCAmount(sent)))
		}
		return refuse(refuseDailyCap, c.policy.checkDailyCap(sent, c.units))
	}
}

// send is a send that Send runs (under its key's claim, req.claim).
func (s *Service) send(ctx context.Context, from *ent.Agent, req SendRequest) (*SendResult, error) {
	c, err := s.checkSend(ctx, from, req)
	if err != nil {
		return nil, err
	}
	if c.policy.Outcome == SpendHeld {
		op := spendapproval.OperationSend
		if req.ToUser {
			op = spendapproval.OperationSendToUser
		}
		held, err := s.holdOperation(ctx, from, op, heldSend{ToUsername: req.ToUsername, ToUser: req.ToUser,
			AmountUSD: req.AmountUSD.String(), Memo: req.Memo, Chain: req.Chain}, c.units, c.to.username, c.policy, req.claim.Key(), req.claim.Fingerprint())
		if err != nil {
			return nil, err
		}
		return s.heldSendResult(held, from.Username, c.to.username), nil
	}
	kind := transfer.KindSend
	if req.ToUser {
		kind = transfer.KindSendToUser
	}
	t, err := s.recordTransfer(ctx, &outgoing{
		kind: kind, from: agentHolder(from), to: c.to, candidates: c.candidates, units: c.units, amount: req.AmountUSD, memo: req.Memo,
		claim:     req.claim,
		underLock: c.underLock(s, from, req),
		recorded:  req.approved.recorded(s),
	})
	if errors.Is(err, ErrInsufficientFunds) {
		return nil, refuse(refuseBalance, err)
	}
	if err != nil {
		return nil, err
	}
	t, err = s.startTransfer(ctx, t, waitOrDefault(req.Wait))
	if err != nil {
		return nil, err
	}
	return s.sendResult(t, from.Username, c.to.username), nil
}

// sendFingerprinted is a send request's canonical form: what the service
// acts on (an absent memo or chain is ""; the amount as a number, so 50 and
// 50.00 are the same request). Wait is how long to wait, not what to do.
type sendFingerprinted struct {
	ToUsername string `json:"to_username"`
	AmountUSD  string `json:"amount_usd"`
	Memo       string `json:"memo"`
	Chain      string `json:"chain"`
}

// sentAnswer is a send's answer as kept.
type sentAnswer struct {
	TransferID uuid.UUID `json:"transfer_id"`
	// ApprovalID: a spending policy held the send (no transfer yet).
	ApprovalID   *uuid.UUID      `json:"approval_id,omitempty"`
	FromUsername string          `json:"from_username"`
	ToUsername   string          `json:"to_username"`
	Chain        string          `json:"chain"`
	Amount       decimal.Decimal `json:"amount"`
	Delivered    decimal.Decimal `json:"delivered"`
	Fee          decimal.Decimal `json:"fee"`
	TxHash       string          `json:"tx_hash"`
	FeeTxHash    string          `json:"fee_tx_hash"`
	Status       string          `json:"status"`
	Message      string          `json:"message"`
}

// sendOp is the send as the runner runs it.
func (s *Service) sendOp(from *ent.Agent, req SendRequest) (idempotency.Op[*SendResult], error) {
	key, err := parsedKey(req.IdempotencyKey)
	if err != nil {
		return idempotency.Op[*SendResult]{}, err
	}
	return idempotency.Op[*SendResult]{
		Request: idempotency.Request{
			Scope: agentIdempotencyScope(from.ID), Key: key, Operation: req.operation(),
			Canonical: sendFingerprinted{ToUsername: req.ToUsername, AmountUSD: req.AmountUSD.String(), Memo: req.Memo, Chain: req.Chain},
		},
		Run: func(ctx context.Context, claim *idempotency.Claim) (*SendResult, error) {
			req.claim = claim
			return s.send(ctx, from, req)
		},
		Keep: sentAnswerOf,
		Replay: func(ctx context.Context, kept json.RawMessage) (*SendResult, error) {
			var a sentAnswer
			if err := json.Unmarshal(kept, &a); err != nil {
				return nil, fmt.Errorf("idempotency key: unreadable send: %w", err)
			}
			if a.ApprovalID != nil {
				return s.replayHeldSend(ctx, *a.ApprovalID, a.FromUsername, a.ToUsername)
			}
			t, err := s.cfg.DB.Ent.Transfer.Get(ctx, a.TransferID)
			if err != nil {
				return nil, fmt.Errorf("idempotency key: transfer: %w", err)
			}
			return &SendResult{
				Transfer: t, FromUsername: a.FromUsername, ToUsername: a.ToUsername, Chain: chains.Name(a.Chain),
				Amount: a.Amount, Delivered: a.Delivered, Fee: a.Fee, TxHash: a.TxHash, FeeTxHash: a.FeeTxHash,
				Status: a.Status, Message: a.Message,
			}, nil
		},
		Recover: func(ctx context.Context, transferID uuid.UUID) (*SendResult, error) {
			t, err := s.cfg.DB.Ent.Transfer.Get(ctx, transferID)
			if err != nil {
				return nil, fmt.Errorf("transfer: %w", err)
			}
			to, err := s.recipientOf(ctx, t)
			if err != nil {
				return nil, err
			}
			return s.sendResult(t, from.Username, to.username), nil
		},
	}, nil
}

func sentAnswerOf(r *SendResult) any {
	if r.Approval != nil {
		return &sentAnswer{ApprovalID: &r.Approval.Approval.ID, FromUsername: r.FromUsername, ToUsername: r.ToUsername}
	}
	return &sentAnswer{
		TransferID: r.Transfer.ID, FromUsername: r.FromUsername, ToUsername: r.ToUsername, Chain: string(r.Chain),
		Amount: r.Amount, Delivered: r.Delivered, Fee: r.Fee, TxHash: r.TxHash, FeeTxHash: r.FeeTxHash,
		Status: r.Status, Message: r.Message,
	}
}
