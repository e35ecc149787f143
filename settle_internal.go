package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"strings"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
	"agentpay/internal/jobs"
)

// Instant settlement between our own wallets (docs/money.md#internal-payments).
//
// When the payer of a checkout session is one of our custodial wallets and
// the session is one of our merchants' (internalSettlement decides it, the
// one place), the payment needs no transaction of its own: the payer's
// wallet and the treasury that pays the merchant are both ours, so the
// payment is a record on both sides, made in one database transaction:
//
//   - the payer's transfer (kind internal_payment) is recorded and
//     completed at once, with no leg broadcast (tx_hash is the internal
//     reference, "internal:<transfer id>");
//   - the session's payment is recorded with the same reference in place
//     of a transaction hash, through the deposit scan's own code
//     (depositTx.apply: seen, confirmed, final), so payment.detected,
//     payment.confirming and payment.confirmed, the session's move to
//     confirmed, receipts and the settlement it queues are those of an
//     on-chain payment; webhooks carry "tx_hash": null and
//     "internal_reference".
//
// Where the USDC is: it stays in the payer's custodial wallet, physically,
// until the payment's settlement collects it. The payment's sweep (the
// first leg of every settlement, treasury_sweeps.go) is, for an internal payment,
// a leg from the payer's wallet to the treasury instead of from a deposit
// address (sweepLeg), with the same reference, columns and retries; the
// batch then pays the merchant out of the treasury, netted with its other
// payments, exactly as for an on-chain payment. Until the collection is
// included the payment counts as in flight from the payer's wallet (the
// no-overdraft rule, transfer_available.go: walletSends), so the wallet can never
// spend it twice; once included, the wallet's books count it as moved.
//
// The books (treasury_books.go): an internal payment moves no deposit address (its
// payment is left out of the deposit addresses' records), its transfer
// moves nothing on chain (left out of the wallet's outflows), and its
// collection is counted as the wallet's outflow and the treasury's inflow
// (a sweep). The chains see the collection and the batch's net payout
// only.
//
// Gas: none at payment time (nothing is broadcast, no fee leg: the
// merchant pays the 0.1% settlement fee on it as on any payment). The
// collection is one transaction per payment, as an on-chain payment's
// sweep is; collecting many payments of one wallet in one transaction is
// not done yet (docs/money.md says so).

// InternalRefPrefix starts the reference an internal payment carries where
// an on-chain one carries its transaction hash.
const InternalRefPrefix = "internal:"

// internalRef is the reference of the internal payment made by transfer id.
func internalRef(id uuid.UUID) string { return InternalRefPrefix + id.String() }

// isInternalRef reports whether a payment's or transfer's tx_hash is an
// internal reference (no chain transaction).
func isInternalRef(txHash string) bool { return strings.HasPrefix(txHash, InternalRefPrefix) }

// internalPayer is what internalSettlement knows of a payment's two sides.
type internalPayer struct {
	// enabled is Config.InternalSettlement.
	enabled bool
	// custodial: the payer pays from one of our custodial wallets (an
	// agent's), not from an address outside the service.
	custodial bool
	// payerMode is the mode of the payer's wallet (Config.AgentMode),
	// sessionMode the session's: a test session never takes live money.
	payerMode, sessionMode Mode
	// payerChain is the chain of the payer's wallet, sessionChain the one
	// the session is paid on: an internal payment is collected on the
	// chain its merchant is paid on.
	payerChain, sessionChain chains.Name
	// merchantOurs: the session is one of our merchants' (a session we
	// serve always is; false for a payee outside the service).
	merchantOurs bool
}

// internalSettlement is the rule: a payment settles on the internal ledger
// when internal settlement is on, the payer pays from our custodial wallet,
// the payee is our merchant, both are of the same mode, and on the same
// chain. Anything else goes on chain as before.
func internalSettlement(p internalPayer) bool {
	return p.enabled && p.custodial && p.merchantOurs &&
		p.payerMode != "" && p.payerMode == p.sessionMode &&
		p.payerChain != "" && p.payerChain == p.sessionChain
}

// completeInternalPayment completes internal payment t in the transaction
// that recorded it (nothing is broadcast): the transfer completed with its
// internal reference, the agent's counters, then the session's payment
// recorded, confirmed and final through the deposit scan's code. It
// answers the payment statuses reached, for the observer once committed,
// and recompute: the agent's trust is to be recomputed after the commit
// (only when no job queue is wired, see below).
//
// The agent's trust score and tier, which its sent volume moves, are
// recomputed off the answer's path: when the counters written here give
// another score or tier than the one stored (trustStale: a volume step
// crossed, the account's age), a recompute_trust job is queued in this
// transaction and the worker recomputes them once it commits. The tier
// bounds later sends only (their limits), never this one, and a payment
// that moves nothing queues nothing: most queue nothing. Not inside this
// transaction: RecomputeTrust locks the agent row FOR UPDATE, which on
// PostgreSQL deadlocks against the FOR KEY SHARE of concurrent sends'
// inserts (transfer_agent_sends.go, completeTransfer).
func (s *Service) completeInternalPayment(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t *ent.Transfer) (statuses []string, recompute bool, err error) {
	now := s.now().UTC()
	ref := internalRef(t.ID)
	done, err := tx.Transfer.UpdateOneID(t.ID).
		Where(transfer.StatusEQ(transfer.StatusPending)).
		SetStatus(transfer.StatusCompleted).
		SetTxHash(ref).
		SetSubmittedAt(now).
		SetCompletedAt(now).
		Save(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("internal payment %s: completing: %w", t.ID, err)
	}
	*t = *done
	payer, err := tx.Agent.UpdateOneID(*t.FromAgentID).AddTxCount(1).AddVolumeSent(t.Amount).Save(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("internal payment %s: counters: %w", t.ID, err)
	}
	if trustStale(payer, now) {
		if s.cfg.Jobs == nil {
			recompute = true // no worker wired (some tests): after the commit
		} else if _, err := s.cfg.Jobs.InsertTx(ctx, sqlTx, jobs.RecomputeTrustArgs{AgentID: payer.ID}, nil); err != nil {
			return nil, false, fmt.Errorf("internal payment %s: enqueueing the trust recompute: %w", t.ID, err)
		}
	}
	chain := chains.Name(t.Chain)
	d := &depositTx{s: s, tx: tx, sqlTx: sqlTx, mode: s.cfg.AgentMode, chain: chain, decimals: USDCDecimals, internal: true,
		addrs: map[string]string{s.wallets(chain).NormalizeAddress(t.ToAddress): t.ToAddress}}
	// The confirmations an on-chain payment waits for, reached at once:
	// the same three events, in the same order.
	required := max(s.networks(s.cfg.AgentMode)[chain].Confirmations, 1)
	dep := chains.Deposit{Chain: chain, TxHash: ref, From: t.FromAddress, To: t.ToAddress, Amount: big.NewInt(t.Amount)}
	if err := d.applyInternal(ctx, [3]chains.DepositEvent{
		{Kind: chains.DepositSeen, Deposit: dep, Required: required},
		{Kind: chains.DepositConfirmations, Deposit: dep, Confirmations: required, Required: required},
		{Kind: chains.DepositFinal, Deposit: dep, Confirmations: required, Required: required},
	}); err != nil {
		return nil, false, fmt.Errorf("internal payment %s: recording the payment: %w", t.ID, err)
	}
	return d.statuses, recompute, nil
}

// applyInternal applies an internal payment's three events (seen,
// confirmations, final, of one deposit) as apply does one by one, with
// the same rows, events, status publications and settlement, but reading
// the deposit address, locking the session and reading the payment once
// for the three: they run in the one transaction that records the
// payment, under the session's lock, so a second read would find only
// what the step before wrote (which each step answers instead). A payment
// already recorded under the deposit's identity (not an internal one,
// whose reference is its new transfer's) goes through apply, event by
// event.
func (d *depositTx) applyInternal(ctx context.Context, evs [3]chains.DepositEvent) error {
	dep := evs[0].Deposit
	da, sess, err := d.depositSession(ctx, dep)
	if da == nil || err != nil {
		return err
	}
	exists, err := d.tx.Payment.Query().
		Where(payment.Chain(string(d.chain)), payment.TxHash(dep.TxHash), payment.LogIndex(int(dep.Index))).
		Exist(ctx)
	if err != nil {
		return fmt.Errorf("reading payment: %w", err)
	}
	if exists {
		for _, ev := range evs {
			if err := d.apply(ctx, ev); err != nil {
				return err
			}
		}
		return nil
	}
	p, sess, err := d.record(ctx, sess, da, evs[0])
	if err != nil {
		return err
	}
	if p, err = d.confirmations(ctx, sess, p, evs[1]); err != nil {
		return err
	}
	return d.final(ctx, sess, p, evs[2])
}

// uncollectedInternal sums, in base units, the internal payments made from
// address on chain whose collection is not included yet (not swept): USDC
// the wallet still holds but has spent.
func uncollectedInternal(ctx context.Context, db *ent.Client, chain chains.Name, address string) (int64, error) {
	n, err := db.Payment.Query().
		Where(
			payment.Chain(string(chain)),
			payment.FromAddress(address),
			payment.TxHashHasPrefix(InternalRefPrefix),
			payment.SweptAtIsNil(),
			payment.StatusNEQ(payment.StatusFailed),
		).
		Aggregate(func(sel *entsql.Selector) string {
			return "COALESCE(SUM(" + sel.C(payment.FieldAmountToken) + "), 0)"
		}).Int(ctx)
	if err != nil {
		return 0, fmt.Errorf("summing uncollected internal payments: %w", err)
	}
	return int64(n), nil
}

// payerWalletKey opens the custodial key of the wallet internal payment p
// was made from: its collection is signed with it.
func (s *Service) payerWalletKey(ctx context.Context, p *ent.Payment) ([]byte, error) {
	w, err := s.cfg.DB.Ent.Wallet.Query().
		Where(wallet.Chain(p.Chain), wallet.Address(p.FromAddress), wallet.KindEQ(wallet.KindCustodial)).
		Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("internal payment %s: payer wallet: %w", p.ExternalID, err)
	}
	return s.walletKey(ctx, w)
}

// TxHash is the payment's chain transaction as answered: "" for none yet,
// and for an internal payment, which has none (InternalReference).
func (p *CheckoutPayment) TxHash() string {
	if p.Transfer == nil {
		return ""
	}
	return ChainTxHash(p.Transfer.TxHash)
}

// InternalReference is the reference of an internal payment
// ("internal:<transfer id>"), "" for an on-chain one.
func (p *CheckoutPayment) InternalReference() string {
	if p.Transfer == nil || !isInternalRef(p.Transfer.TxHash) {
		return ""
	}
	return p.Transfer.TxHash
}

// ChainTxHash is txHash as answered: "" for an internal reference, which
// names no chain transaction.
func ChainTxHash(txHash string) string {
	if isInternalRef(txHash) {
		return ""
	}
	return txHash
}
