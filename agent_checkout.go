package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/transfer"
	"agentpay/internal/idempotency"
	"agentpay/internal/store"
)

// Agents pay checkout sessions (docs/agent-commerce.md).
//
// An agent's checkout payment is a send (transfer_agent_sends.go) from its custodial
// wallet to the session's deposit address on the chosen chain: the same
// gasless broadcast, tier limits (per-send and daily, the payment counting
// as sent), no-overdraft rule under the wallet lock, idempotency and
// reconciler. It differs in three ways:
//
//   - The amount is the session's, exactly, and no treasury fee leg goes
//     with it: the deposit address must receive the amount due, and the
//     merchant pays the settlement fee on it as on any payment.
//   - The transaction that records the transfer also takes the session as
//     a customer's chain selection does (pending or detecting -> detecting
//     on the chosen chain, the address found or allocated as the hosted
//     page does), under the session's row lock, refusing a session that
//     has a payment or another agent payment not failed: two agents paying
//     one session at once cannot both pay it.
//   - The transaction that completes the transfer (whoever completes it:
//     the request, or the reconciler after a crash) records the session's
//     payment at once, from the transaction the service broadcast, with the
//     identity the deposit scan gives the same transfer: chain, tx hash and
//     position (EVM log index, Solana account index), read from the chain
//     by the ledger's DepositsIn, which decodes a transaction exactly as
//     the watcher does. It goes through the scan's own code (depositTx.apply,
//     a DepositSeen event), so webhooks (payment.detected), the session's
//     move to confirming and its subscription behave as for any payment.
//     When the scan later finds the transfer, the payment exists under
//     that identity (payments are unique by chain, tx_hash, log_index) and
//     the scan only follows its confirmations to payment.confirmed. If the
//     scan found it first, the record finds the payment and changes
//     nothing. If the deposit cannot be read, the transfer completes anyway
//     and the scan records the payment when it finds it.
//
// Mode: agents' wallets live on one network (Config.AgentMode: live
// networks in production, test networks under `agentpay dev`). A session
// of the other mode is refused (ErrConflict): a test session must never
// take live money, and a live session must never count test-network money
// as paid.

// PayCheckoutRequest is an agent's payment of a checkout session (POST
// /checkout/pay/{external_id}/agent-pay).
type PayCheckoutRequest struct {
	ExternalID string
	// Chain is optional: "" picks as sends do, the first of solana, base
	// that the merchant accepts and whose available balance covers the
	// amount.
	Chain string
	// Wait bounds how long PayCheckout waits for inclusion; 0 means
	// DefaultSendWait. A payment not included by then is answered pending.
	Wait time.Duration

	// IdempotencyKey makes the payment safe to retry: nil runs it
	// without one.
	IdempotencyKey *string

	// claim is the key's claim the payment runs under; its key and
	// fingerprint are kept on a payment a policy holds. approved: it
	// runs on a human's approval (agent_spend_decisions.go).
	claim    *idempotency.Claim
	approved *approvedRun
}

// payCheckoutOperation names the request for its Idempotency-Key.
const payCheckoutOperation = "pay_checkout"

// SessionExternalIDMaxLen bounds a session id input (cs_live_ and 24
// characters are 32).
const SessionExternalIDMaxLen = 64

// CheckoutPayment is an agent's checkout payment as answered to the agent.
type CheckoutPayment struct {
	// Approval is set, and the rest empty but AmountUSD, when a spending
	// policy held the payment (Status awaiting_approval).
	Approval *SpendApprovalView
	Session  *ent.CheckoutSession
	Transfer *ent.Transfer
	// Payment is the session's payment, nil until the transfer is included
	// (or while the scan has not found one whose deposit could not be read).
	Payment   *ent.Payment
	Chain     chains.Name
	AmountUSD decimal.Decimal
	// Status is the payment's: pending (not yet included), detected,
	// confirming, confirmed, or failed.
	Status        string
	Confirmations int
	// Required is the confirmations the chain needs (0 when unknown).
	Required uint64
	Message  string
}

// payCheckout pays the session's exact amount from the agent's custodial
// wallet to its deposit address, as the note above says.
//
// Refusals (each changes nothing): an unknown session (ErrNotFound); a
// chain that is not one agents hold wallets on, that the merchant does not
// accept or that is not configured (ValidationError); a session of the
// other mode than agents' wallets, or one that is not awaiting payment,
// has a payment, or is past its deadline (ErrConflict); a deactivated
// merchant or an amount over the tier's per-send or daily limit
// (ErrForbidden); available balance short (ErrInsufficientFunds).
func (s *Service) payCheckout(ctx context.Context, a *ent.Agent, req PayCheckoutRequest) (*CheckoutPayment, error) {
	if req.ExternalID == "" || len(req.ExternalID) > SessionExternalIDMaxLen {
		return nil, Invalid("external_id", "must be 1 to %d characters long", SessionExternalIDMaxLen)
	}
	var chain chains.Name
	if strings.TrimSpace(req.Chain) != "" {
		var err error
		if chain, err = chains.ParseName(req.Chain); err != nil {
			return nil, Invalid("chain", "%s", err)
		}
		if !agentChain(chain) {
			return nil, Invalid("chain", "agents hold wallets on solana and base only, not %s", chain)
		}
	}
	sess, err := s.sessionByExternalID(ctx, req.ExternalID)
	if err != nil {
		return nil, err
	}
	mode := sessionMode(sess)
	if mode != s.cfg.AgentMode {
		return nil, fmt.Errorf("%w: session %s is a %s-mode session and agents' wallets hold %s-network USDC: a session is paid only with money of its own mode",
			ErrConflict, sess.ExternalID, mode, s.cfg.AgentMode)
	}
	m := sess.Edges.Merchant
	if !m.Active {
		return nil, fmt.Errorf("%w: merchant is deactivated", ErrForbidden)
	}
	if err := selectable(sess, s.now(), nil); err != nil {
		return nil, err
	}
	units, err := ToBaseUnits("amount_usd", sess.AmountUsd, USDCDecimals)
	if err != nil || !units.IsInt64() || units.Sign() <= 0 {
		return nil, fmt.Errorf("pay checkout: session %s amount %s out of range", sess.ExternalID, sess.AmountUsd)
	}
	limits := LimitsFor(string(a.Tier))
	if sess.AmountUsd.GreaterThan(limits.PerSend) {
		return nil, fmt.Errorf("%w: %s USD exceeds the per-send limit of %s USD of tier %s",
			ErrForbidden, sess.AmountUsd, limits.PerSend, a.Tier)
	}
	policy, err := s.decideSpend(ctx, a, checkoutSpend(SpendPayCheckout, m, units.Int64()), req.approved != nil)
	if err != nil {
		return nil, err
	}
	if policy.Outcome != SpendAllowed {
		return s.heldCheckoutPayment(ctx, a, req, sess, units.Int64(), policy)
	}
	candidates, err := s.checkoutChains(m, mode, chain)
	if err != nil {
		return nil, err
	}
	// The deposit address of each candidate chain, found or allocated as
	// the hosted page's selection does (the scan's cursor first, so the
	// payment cannot land before the chain's first scan starts).
	external := make(map[chains.Name]string, len(candidates))
	for _, c := range candidates {
		da, err := s.sessionDepositAddress(ctx, sess, c)
		if err != nil {
			return nil, err
		}
		external[c] = da.Address
	}
	from := agentHolder(a)
	// Our agent's wallet paying our merchant's session, same mode (checked
	// above) and chain (the wallet's chain is the payment's).
	internal := internalSettlement(internalPayer{
		enabled: s.cfg.InternalSettlement, custodial: true, merchantOurs: true,
		payerMode: s.cfg.AgentMode, sessionMode: mode, payerChain: candidates[0], sessionChain: candidates[0],
	})
	kind := transfer.KindCheckoutPayment
	if internal {
		kind = transfer.KindInternalPayment
	}
	var (
		statuses       []string
		recomputeTrust bool
	)
	t, err := s.recordTransfer(ctx, &outgoing{
		kind: kind, internal: internal, from: from, external: external, candidates: candidates, units: units.Int64(), amount: sess.AmountUsd,
		memo: "checkout " + sess.ExternalID, checkoutSessionID: &sess.ID,
		claim: req.claim,
		underLock: func(ctx context.Context, tx *ent.Tx) error {
			sent, err := sentToday(ctx, tx.Transfer, from, s.now())
			if err != nil {
				return err
			}
			if USDCAmount(sent + units.Int64()).GreaterThan(limits.Daily) {
				return fmt.Errorf("%w: %s USD exceeds the daily limit of %s USD of tier %s (%s USD already sent today)",
					ErrForbidden, sess.AmountUsd, limits.Daily, a.Tier, USDCAmount(sent))
			}
			return policy.checkDailyCap(sent, units.Int64())
		},
		recorded: func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) error {
			if _, err := s.takeSession(ctx, sess.ID, sessionTake{payer: payerAgent, chain: chains.Name(t.Chain), token: TokenUSDC, ownTransfer: &t.ID}); err != nil {
				return err
			}
			if approved := req.approved.recorded(s); approved != nil {
				if err := approved(ctx, tx, sqlTx, t); err != nil {
					return err
				}
			}
			if internal {
				var err error
				statuses, recomputeTrust, err = s.completeInternalPayment(ctx, tx, sqlTx, t)
				return err
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	if internal {
		s.observer().SendStatus(t.Chain, string(transfer.StatusCompleted))
		for _, status := range statuses {
			s.observer().PaymentStatus(string(mode), t.Chain, status)
		}
		// Queued as a job in the payment's transaction
		// (completeInternalPayment says why); without a job queue, after
		// the commit, as completeTransfer does.
		if recomputeTrust {
			if err := s.RecomputeTrust(ctx, a.ID); err != nil {
				s.logger.WarnContext(ctx, "recompute trust after internal payment", "agent", a.ID, "err", err)
			}
		}
		return s.checkoutPaymentOf(ctx, t)
	}
	t, err = s.startTransfer(ctx, t, waitOrDefault(req.Wait))
	if err != nil {
		return nil, err
	}
	return s.checkoutPaymentOf(ctx, t)
}

// checkoutChains are the chains an agent's payment to the merchant may go
// on, in order: chain alone when given, else solana then base; each one the
// merchant accepts and the mode configures.
func (s *Service) checkoutChains(m *ent.Merchant, mode Mode, chain chains.Name) ([]chains.Name, error) {
	if chain != "" {
		if !merchantAccepts(m, chain, TokenUSDC) {
			return nil, Invalid("chain", "%s %s is not accepted by this merchant", chain, TokenUSDC)
		}
		if _, err := s.ledger(mode, chain); err != nil {
			return nil, err
		}
		return []chains.Name{chain}, nil
	}
	var out []chains.Name
	for _, c := range sendChainOrder {
		if _, ok := s.networks(mode)[c]; ok && merchantAccepts(m, c, TokenUSDC) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, Invalid("chain", "the merchant accepts USDC on none of the chains agents hold wallets on (solana, base)")
	}
	return out, nil
}

// sessionDepositAddress is the session's deposit address on chain, the one
// a customer selecting chain was or would be given: the newest one the
// session has there, else a new one. The session itself is not changed
// (takeSession does that once the payment is recorded).
func (s *Service) sessionDepositAddress(ctx context.Context, sess *ent.CheckoutSession, chain chains.Name) (*ent.DepositAddress, error) {
	if err := s.ensureCursor(ctx, sessionMode(sess), chain); err != nil {
		return nil, err
	}
	var da *ent.DepositAddress
	err := retryIndexTaken(func() error {
		return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
			// The session's lock, as a selection takes it: one address per
			// chain however many ask at once.
			if _, err := store.ForUpdate(s.cfg.DB, tx.CheckoutSession.Query().Where(checkoutsession.ID(sess.ID))).Only(ctx); err != nil {
				return err
			}
			var err error
			da, err = s.depositAddressOn(ctx, tx, sqlTx, sess.ID, chain)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("pay checkout: deposit address on %s: %w", chain, err)
	}
	return da, nil
}

// checkoutDepositOf reads from the chain the deposit an included checkout
// payment t made to its session's address, as the deposit scan will report
// it; nil when t is no checkout payment or the deposit cannot be read (the
// scan then records the payment when it finds the transfer).
func (s *Service) checkoutDepositOf(ctx context.Context, t *ent.Transfer) *chains.Deposit {
	if t.Kind != transfer.KindCheckoutPayment || t.CheckoutSessionID == nil || t.TxHash == "" {
		return nil
	}
	ledger, err := s.agentLedger(chains.Name(t.Chain))
	if err != nil {
		return nil
	}
	reader, ok := ledger.(chains.DepositReader)
	if !ok {
		return nil
	}
	deps, err := reader.DepositsIn(ctx, t.TxHash, t.ToAddress)
	if err != nil {
		s.logger.WarnContext(ctx, "pay checkout: reading the deposit; left to the deposit scan", "transfer", t.ID, "tx", t.TxHash, "err", err)
		return nil
	}
	want := big.NewInt(t.Net)
	for _, d := range deps {
		if d.Amount != nil && d.Amount.Cmp(want) == 0 {
			return &d
		}
	}
	s.logger.WarnContext(ctx, "pay checkout: no deposit in the transaction yet; left to the deposit scan", "transfer", t.ID, "tx", t.TxHash)
	return nil
}

// recordCheckoutPayment records the deposit of checkout payment t as its
// session's payment, in the transaction completing t, exactly as the
// deposit scan records a deposit it sees.
func (s *Service) recordCheckoutPayment(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer, dep chains.Deposit) error {
	chain := chains.Name(t.Chain)
	mode := s.cfg.AgentMode
	network := s.networks(mode)[chain]
	d := &depositTx{s: s, tx: tx, sqlTx: sqlTx, mode: mode, chain: chain, decimals: USDCDecimals,
		addrs: map[string]string{s.wallets(chain).NormalizeAddress(dep.To): t.ToAddress}}
	if network.Ledger != nil {
		d.decimals = network.Ledger.Decimals()
	}
	err := d.apply(ctx, chains.DepositEvent{Kind: chains.DepositSeen, Deposit: dep, Required: network.Confirmations})
	if err != nil {
		return fmt.Errorf("pay checkout: recording the payment of transfer %s: %w", t.ID, err)
	}
	return nil
}

// checkoutPaymentOf answers checkout payment t as it stands.
func (s *Service) checkoutPaymentOf(ctx context.Context, t *ent.Transfer) (*CheckoutPayment, error) {
	if (t.Kind != transfer.KindCheckoutPayment && t.Kind != transfer.KindInternalPayment) || t.CheckoutSessionID == nil {
		return nil, fmt.Errorf("transfer %s is no checkout payment", t.ID)
	}
	sess, err := s.cfg.DB.Ent.CheckoutSession.Get(ctx, *t.CheckoutSessionID)
	if err != nil {
		return nil, fmt.Errorf("pay checkout: reading session: %w", err)
	}
	out := &CheckoutPayment{
		Session: sess, Transfer: t, Chain: chains.Name(t.Chain), AmountUSD: USDCAmount(t.Amount), Status: "pending",
	}
	if n, ok := s.networks(s.cfg.AgentMode)[out.Chain]; ok {
		out.Required = n.Confirmations
	}
	if t.TxHash != "" {
		p, err := s.cfg.DB.Ent.Payment.Query().Where(
			payment.SessionID(sess.ID), payment.Chain(t.Chain), payment.TxHash(t.TxHash),
		).Order(ent.Desc(payment.FieldCreatedAt)).First(ctx)
		switch {
		case err == nil:
			out.Payment, out.Status, out.Confirmations = p, string(p.Status), p.Confirmations
		case !ent.IsNotFound(err):
			return nil, fmt.Errorf("pay checkout: reading payment: %w", err)
		}
	}
	if t.Status == transfer.StatusFailed {
		out.Status = "failed"
	}
	amount := usd(out.AmountUSD)
	switch out.Status {
	case "pending":
		out.Message = fmt.Sprintf("Payment of %s USDC to checkout %s on %s is pending on-chain inclusion.", amount, sess.ExternalID, t.Chain)
	case "failed":
		out.Message = fmt.Sprintf("Payment of %s USDC to checkout %s on %s failed: %s", amount, sess.ExternalID, t.Chain, t.Error)
	case string(payment.StatusConfirmed):
		out.Message = fmt.Sprintf("Paid %s USDC to checkout %s on %s: confirmed.", amount, sess.ExternalID, t.Chain)
	default:
		out.Message = fmt.Sprintf("Paid %s USDC to checkout %s on %s: %s, %d of %d confirmations.",
			amount, sess.ExternalID, t.Chain, out.Status, out.Confirmations, out.Required)
	}
	return out, nil
}

// checkoutPaymentAnswer is a checkout payment's answer as kept under its
// Idempotency-Key: the transfer, whose state a replay reads again (the
// answer is the payment's status now, which moves as the chain confirms).
type checkoutPaymentAnswer struct {
	TransferID uuid.UUID `json:"transfer_id"`
	// ApprovalID: a spending policy held the payment (no transfer).
	ApprovalID *uuid.UUID `json:"approval_id,omitempty"`
}

// checkoutFingerprinted is a checkout payment's canonical form.
type checkoutFingerprinted struct {
	ExternalID string `json:"external_id"`
	Chain      string `json:"chain"`
}

// PayCheckout is the agent's checkout payment (payCheckout), under
// req.IdempotencyKey when set: the one entry point of a checkout payment.
// A replay answers the payment as it is now (its status moves as the
// chain confirms), so only its transfer (or held approval) is kept.
func (s *Service) PayCheckout(ctx context.Context, a *ent.Agent, req PayCheckoutRequest) (res *CheckoutPayment, replayed bool, err error) {
	key, err := parsedKey(req.IdempotencyKey)
	if err != nil {
		return nil, false, err
	}
	answerOf := func(ctx context.Context, id uuid.UUID) (*CheckoutPayment, error) {
		t, err := s.cfg.DB.Ent.Transfer.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("idempotency key: transfer: %w", err)
		}
		return s.checkoutPaymentOf(ctx, t)
	}
	return idempotency.Do(ctx, s.idem, idempotency.Op[*CheckoutPayment]{
		Request: idempotency.Request{
			Scope: agentIdempotencyScope(a.ID), Key: key, Operation: payCheckoutOperation,
			Canonical: checkoutFingerprinted{ExternalID: req.ExternalID, Chain: req.Chain},
		},
		Run: func(ctx context.Context, claim *idempotency.Claim) (*CheckoutPayment, error) {
			req.claim = claim
			return s.payCheckout(ctx, a, req)
		},
		Keep: func(p *CheckoutPayment) any {
			if p.Approval != nil {
				return checkoutPaymentAnswer{ApprovalID: &p.Approval.Approval.ID}
			}
			return checkoutPaymentAnswer{TransferID: p.Transfer.ID}
		},
		Replay: func(ctx context.Context, kept json.RawMessage) (*CheckoutPayment, error) {
			var out checkoutPaymentAnswer
			if err := json.Unmarshal(kept, &out); err != nil {
				return nil, fmt.Errorf("idempotency key: unreadable checkout payment: %w", err)
			}
			if out.ApprovalID != nil {
				return s.replayHeldCheckout(ctx, *out.ApprovalID)
			}
			return answerOf(ctx, out.TransferID)
		},
		Recover: answerOf,
	})
}
