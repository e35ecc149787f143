package agentpay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/predicate"
	"agentpay/ent/transfer"
	"agentpay/ent/user"
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
// point leaves a row the reconciler (reconcile.go) can finish without paying
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
	// (spendapproval_decisions.go); only the policies' caps apply.
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

// holder is a party whose custodial wallets a transfer leaves or reaches:
// an agent or a human user. A transfer's sender is one (an agent's send, a
// user's withdrawal), and so is its recipient, except that a withdrawal
// pays an external address: its recipient is the zero holder (none).
type holder struct {
	agentID, userID *uuid.UUID
	username        string
}

func agentHolder(a *ent.Agent) holder { return holder{agentID: &a.ID, username: a.Username} }
func userHolder(u *ent.User) holder   { return holder{userID: &u.ID, username: u.Username} }

// none: no party (a withdrawal's recipient, an external address).
func (h holder) none() bool { return h.agentID == nil && h.userID == nil }

// wallets selects the holder's custodial wallets.
func (h holder) wallets(db *ent.Client) *ent.WalletQuery {
	q := db.Wallet.Query().Where(wallet.KindEQ(wallet.KindCustodial))
	if h.agentID != nil {
		return q.Where(wallet.AgentID(*h.agentID))
	}
	return q.Where(wallet.UserID(*h.userID))
}

// sent selects the transfers the holder sent.
func (h holder) sent() predicate.Transfer {
	if h.agentID != nil {
		return transfer.FromAgentID(*h.agentID)
	}
	return transfer.FromUserID(*h.userID)
}

// party is the holder as the party its account events are for.
func (h holder) party() Party {
	if h.agentID != nil {
		return AgentParty(*h.agentID)
	}
	return UserParty(*h.userID)
}

// resolveRecipient finds the agent (or, for send-to-user, the user) named
// by req; none is ErrNotFound.
func (s *Service) resolveRecipient(ctx context.Context, req SendRequest) (holder, error) {
	if req.ToUser {
		u, err := s.cfg.DB.Ent.User.Query().Where(user.Username(req.ToUsername)).Only(ctx)
		if ent.IsNotFound(err) {
			return holder{}, fmt.Errorf("%w: no user named %q", ErrNotFound, req.ToUsername)
		}
		if err != nil {
			return holder{}, fmt.Errorf("send: reading recipient: %w", err)
		}
		return userHolder(u), nil
	}
	a, err := s.cfg.DB.Ent.Agent.Query().Where(agent.Username(req.ToUsername)).Only(ctx)
	if ent.IsNotFound(err) {
		return holder{}, fmt.Errorf("%w: no agent named %q", ErrNotFound, req.ToUsername)
	}
	if err != nil {
		return holder{}, fmt.Errorf("send: reading recipient: %w", err)
	}
	return agentHolder(a), nil
}

// holderOf reads the agent or user of the ids (the zero holder for none).
func (s *Service) holderOf(ctx context.Context, agentID, userID *uuid.UUID) (holder, error) {
	switch {
	case agentID != nil:
		a, err := s.cfg.DB.Ent.Agent.Get(ctx, *agentID)
		if err != nil {
			return holder{}, err
		}
		return agentHolder(a), nil
	case userID != nil:
		u, err := s.cfg.DB.Ent.User.Get(ctx, *userID)
		if err != nil {
			return holder{}, err
		}
		return userHolder(u), nil
	}
	return holder{}, nil
}

// recipientOf is whom a recorded transfer pays (none for a withdrawal).
func (s *Service) recipientOf(ctx context.Context, t *ent.Transfer) (holder, error) {
	h, err := s.holderOf(ctx, t.ToAgentID, t.ToUserID)
	if err != nil {
		return holder{}, fmt.Errorf("recipient: %w", err)
	}
	return h, nil
}

// senderOf is who sent a recorded transfer.
func (s *Service) senderOf(ctx context.Context, t *ent.Transfer) (holder, error) {
	if t.FromAgentID == nil && t.FromUserID == nil {
		return holder{}, fmt.Errorf("transfer %s has no sender", t.ID)
	}
	h, err := s.holderOf(ctx, t.FromAgentID, t.FromUserID)
	if err != nil {
		return holder{}, fmt.Errorf("sender: %w", err)
	}
	return h, nil
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
	// (agentcheckout.go); nil for any other transfer.
	checkoutSessionID *uuid.UUID
	// internal: an internal payment (internalsettlement.go), completed in
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

// sendPlan is what a send learnt before its transaction: the first
// candidate chain whose available balance covers the amount (nil when
// none), and the shortfall of each read that did not.
type sendPlan struct {
	chosen     *sendBalance
	shortfalls []string
	// noChain: no candidate had wallets of both agents and a ledger.
	noChain bool
}

// moved implements balancePlan: a plan that chose nothing has nothing to
// recheck (it is refused).
func (p *sendPlan) moved(ctx context.Context, tx *ent.Tx) (bool, error) {
	if p.chosen == nil {
		return false, nil
	}
	return p.chosen.moved(ctx, tx)
}

func (p *sendPlan) refusal(amount decimal.Decimal) error {
	if p.noChain || len(p.shortfalls) == 0 {
		return Invalid("chain", "no chain is available for this send")
	}
	return fmt.Errorf("%w: %s USDC needed, available: %s (sends in flight count as spent)",
		ErrInsufficientFunds, amount, strings.Join(p.shortfalls, ", "))
}

// sendBalance is a wallet's available balance on one chain as read before
// the send's transaction (available.go): the on-chain balance minus the
// sender's sends in flight from the wallet.
type sendBalance struct {
	available
	chain    chains.Name
	sender   holder
	from, to string // sender's wallet address, and where the send goes
}

// planSend reads, outside any transaction, the available balance of the
// sender's wallet on each candidate chain in order (the sender holding a
// wallet there, the recipient too or the withdrawal's address being of
// that chain, its ledger configured), until one covers units. Why reading
// it before the transaction that holds the wallet lock is safe:
// available.go.
//
// db reads the database: the plain client before the send's transaction,
// the transaction's under the lock.
func (s *Service) planSend(ctx context.Context, db *ent.Client, o *outgoing) (*sendPlan, error) {
	senderWallets, err := o.from.wallets(db).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("send: reading wallets: %w", err)
	}
	var recipientWallets []*ent.Wallet
	if !o.to.none() {
		if recipientWallets, err = o.to.wallets(db).All(ctx); err != nil {
			return nil, fmt.Errorf("send: reading recipient wallets: %w", err)
		}
	}
	explicit := len(o.candidates) == 1
	plan := &sendPlan{noChain: true}
	for _, c := range o.candidates {
		sw := walletOn(senderWallets, c)
		var to string
		if o.to.none() {
			to = o.external[c]
		} else if rw := walletOn(recipientWallets, c); rw != nil {
			to = rw.Address
		}
		if sw == nil || to == "" {
			if explicit && o.to.none() {
				return nil, Invalid("chain", "you hold no wallet on %s", c)
			}
			if explicit {
				return nil, Invalid("chain", "sender and recipient do not both hold a wallet on %s", c)
			}
			continue
		}
		ledger, err := s.agentLedger(c)
		if err != nil {
			if explicit {
				return nil, err
			}
			continue
		}
		plan.noChain = false
		b := &sendBalance{chain: c, sender: o.from, from: sw.Address, to: to}
		if b.available, err = s.readAvailable(ctx, db, ledger, sw.Address, walletSends{sender: o.from, chain: c, from: sw.Address}); err != nil {
			return nil, err
		}
		if b.units >= o.units {
			plan.chosen = b
			return plan, nil
		}
		plan.shortfalls = append(plan.shortfalls, fmt.Sprintf("%s USDC on %s", USDCAmount(b.units), c))
	}
	return plan, nil
}

// walletSends are the outflows of a custodial wallet (available.go): the
// transfers recorded from it, in flight while pending or submitted.
type walletSends struct {
	sender holder
	chain  chains.Name
	from   string
}

func (w walletSends) query(db *ent.Client) *ent.TransferQuery {
	return db.Transfer.Query().Where(w.sender.sent(), transfer.Chain(string(w.chain)), transfer.FromAddress(w.from))
}

func (w walletSends) recorded(ctx context.Context, db *ent.Client) (int, error) {
	n, err := w.query(db).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("send: counting sends: %w", err)
	}
	return n, nil
}

func (w walletSends) inFlight(ctx context.Context, db *ent.Client) (int64, error) {
	sent, err := sumAmounts(ctx, w.query(db).Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)))
	if err != nil {
		return 0, err
	}
	// Internal payments (internalsettlement.go) leave the wallet's USDC in
	// it until their collection is included: spent all the same.
	uncollected, err := uncollectedInternal(ctx, db, w.chain, w.from)
	if err != nil {
		return 0, err
	}
	return sent + uncollected, nil
}

// sumAmounts sums the amount column of the selected transfers in SQL
// (integers: exact on both engines).
func sumAmounts(ctx context.Context, q *ent.TransferQuery) (int64, error) {
	n, err := q.Aggregate(func(sel *entsql.Selector) string {
		return "COALESCE(SUM(" + sel.C(transfer.FieldAmount) + "), 0)"
	}).Int(ctx)
	if err != nil {
		return 0, fmt.Errorf("summing transfers: %w", err)
	}
	return int64(n), nil
}

// transferLeg is one of a send's two on-chain transfers.
type transferLeg struct {
	fee    bool
	ref    [32]byte
	hash   string
	to     string
	amount int64
}

// query is what FindTransfer looks for to learn whether the leg of t landed.
func (l *transferLeg) query(t *ent.Transfer) chains.TransferQuery {
	return chains.TransferQuery{From: t.FromAddress, To: l.to, Amount: big.NewInt(l.amount), Ref: l.ref}
}

func (l *transferLeg) name() string {
	if l.fee {
		return "fee"
	}
	return "transfer"
}

// legs returns the transfer's legs: to the recipient, then, for a kind
// with a fee leg, the fee to the treasury (the minimum amount rules out a
// fee of 0).
func (s *Service) legs(t *ent.Transfer) ([]*transferLeg, error) {
	k, err := kindOf(t)
	if err != nil {
		return nil, err
	}
	net := &transferLeg{to: t.ToAddress, amount: t.Net, hash: t.TxHash}
	copy(net.ref[:], t.Ref)
	out := []*transferLeg{net}
	if k.fee {
		if t.Fee <= 0 {
			return nil, fmt.Errorf("transfer %s: a %s without its fee", t.ID, t.Kind)
		}
		to := s.cfg.Treasury.Address(chains.Name(t.Chain))
		if to == "" {
			return nil, fmt.Errorf("transfer %s: no treasury address for %s", t.ID, t.Chain)
		}
		if len(t.FeeRef) != 32 {
			return nil, fmt.Errorf("transfer %s: fee ref missing", t.ID)
		}
		fee := &transferLeg{fee: true, to: to, amount: t.Fee, hash: t.FeeTxHash}
		copy(fee.ref[:], t.FeeRef)
		out = append(out, fee)
	}
	return out, nil
}

// senderKey opens the custodial key of the wallet a transfer is sent from.
func (s *Service) senderKey(ctx context.Context, t *ent.Transfer) ([]byte, error) {
	from := holder{agentID: t.FromAgentID, userID: t.FromUserID}
	if from.none() {
		return nil, fmt.Errorf("transfer %s has no sender", t.ID)
	}
	w, err := from.wallets(s.cfg.DB.Ent).Where(
		wallet.Chain(t.Chain),
		wallet.Address(t.FromAddress),
	).Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("transfer %s: sender wallet: %w", t.ID, err)
	}
	return s.walletKey(ctx, w)
}

// afterBroadcast calls Config.AfterBroadcast, when set (a test's crash
// point), after a broadcast the service has not yet recorded.
func (s *Service) afterBroadcast(what string) {
	if s.cfg.AfterBroadcast != nil {
		s.cfg.AfterBroadcast(what)
	}
}

// startTransfer broadcasts both legs of a freshly recorded transfer, records
// their hashes, and waits (at most wait) for both to be included.
func (s *Service) startTransfer(ctx context.Context, t *ent.Transfer, wait time.Duration) (*ent.Transfer, error) {
	ledger, err := s.agentLedger(chains.Name(t.Chain))
	if err != nil {
		return nil, err
	}
	legs, err := s.legs(t)
	if err != nil {
		return nil, err
	}
	key, err := s.senderKey(ctx, t)
	if err != nil {
		return nil, err
	}
	defer clear(key)

	for _, leg := range legs {
		sub, err := ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: leg.to, Amount: big.NewInt(leg.amount), Ref: leg.ref})
		if sub.TxHash != "" {
			// Sent, or unknown whether the node got it: either way the hash
			// is what to follow.
			leg.hash = sub.TxHash
		}
		if err == nil || sub.TxHash != "" {
			s.afterBroadcast("send")
			continue
		}
		if errors.Is(err, chains.ErrRefused) && leg != legs[0] {
			// Nothing of this leg moved, but the payment before it went
			// out: the send cannot fail any more. It stays in flight with
			// the reason, and the reconciler sends this leg again until the
			// chain takes it.
			s.logger.WarnContext(ctx, "send: leg refused after the payment; left to the reconciler", "transfer", t.ID, "leg", leg.name(), "err", err)
			t2, rerr := s.recordHashes(context.WithoutCancel(ctx), t, legs)
			if rerr != nil {
				return nil, rerr
			}
			return s.noteLegRetry(context.WithoutCancel(ctx), t2, leg, fmt.Sprintf("%s refused by %s: %v", leg.name(), t.Chain, err))
		}
		if errors.Is(err, chains.ErrRefused) {
			// The first leg refused: nothing moved at all, the send fails.
			s.logger.WarnContext(ctx, "send refused by chain", "transfer", t.ID, "leg", leg.name(), "err", err)
			if t2, rerr := s.recordHashes(context.WithoutCancel(ctx), t, legs); rerr == nil {
				if ferr := s.failTransfer(context.WithoutCancel(ctx), t2, fmt.Sprintf("%s refused by %s: %v", leg.name(), t.Chain, err)); ferr != nil {
					return nil, ferr
				}
			}
			if errors.Is(err, chains.ErrInsufficientFunds) && !leg.fee {
				return nil, fmt.Errorf("%w: the chain refused the transfer for lack of USDC", ErrInsufficientFunds)
			}
			return nil, fmt.Errorf("%w: the %s refused the transfer", ErrUnavailable, t.Chain)
		}
		// Unknown outcome (RPC down, timeout): the row stays pending and the
		// reconciler finds out whether it was broadcast or sends it again
		// with the same ref.
		s.logger.WarnContext(ctx, "send: broadcast outcome unknown; left to the reconciler", "transfer", t.ID, "leg", leg.name(), "err", err)
		if t2, rerr := s.recordHashes(context.WithoutCancel(ctx), t, legs); rerr == nil {
			t = t2
		}
		return t, nil
	}
	t, err = s.recordHashes(context.WithoutCancel(ctx), t, legs)
	if err != nil {
		return nil, err
	}

	// Wait for both legs at once.
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	receipts := make([]chains.Receipt, len(legs))
	errs := make([]error, len(legs))
	var wg sync.WaitGroup
	for i, leg := range legs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			receipts[i], errs[i] = ledger.Wait(waitCtx, leg.hash)
		}()
	}
	wg.Wait()
	for i, leg := range legs {
		if errs[i] != nil || receipts[i].State != chains.TxIncluded {
			if errs[i] == nil && receipts[i].State == chains.TxFailed {
				// (The reconciler would look for another transaction with
				// the same ref first; a fresh send has no other.)
				reason := fmt.Sprintf("%s failed on %s: %s", leg.name(), t.Chain, receipts[i].Err)
				out, err := s.legDidNotGo(context.WithoutCancel(ctx), ledger, t, legs, leg, reason)
				if err != nil || out.Status != transfer.StatusFailed {
					return out, err
				}
				return nil, fmt.Errorf("%w: transfer %s failed on chain (%s)", ErrUnavailable, t.ID, reason)
			}
			// Not included within the wait: answered pending, finished by
			// the worker.
			return s.reload(context.WithoutCancel(ctx), t)
		}
	}
	return s.completeTransfer(context.WithoutCancel(ctx), t)
}

// recordHashes writes the legs' hashes (those known) and marks the transfer
// submitted once they are all known.
func (s *Service) recordHashes(ctx context.Context, t *ent.Transfer, legs []*transferLeg) (*ent.Transfer, error) {
	upd := s.cfg.DB.Ent.Transfer.UpdateOneID(t.ID).
		Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted))
	all := true
	for _, leg := range legs {
		if leg.hash == "" {
			all = false
			continue
		}
		if leg.fee {
			upd.SetFeeTxHash(leg.hash)
		} else {
			upd.SetTxHash(leg.hash)
		}
	}
	if all {
		upd.SetStatus(transfer.StatusSubmitted)
		if t.SubmittedAt == nil {
			upd.SetSubmittedAt(s.now().UTC())
		}
	}
	out, err := upd.Save(ctx)
	if ent.IsNotFound(err) {
		// Completed or failed meanwhile (by the reconciler): keep its state.
		return s.reload(ctx, t)
	}
	if err != nil {
		return nil, fmt.Errorf("transfer %s: recording hashes: %w", t.ID, err)
	}
	return out, nil
}

func (s *Service) reload(ctx context.Context, t *ent.Transfer) (*ent.Transfer, error) {
	out, err := s.cfg.DB.Ent.Transfer.Get(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("transfer %s: %w", t.ID, err)
	}
	return out, nil
}

// legDidNotGo settles a leg the chain refused or reverted: while another
// leg of t has moved money (or may still), t can only be completed, so it
// stays in flight and the leg is sent again (noteLegRetry); otherwise
// nothing moved and t fails with reason.
func (s *Service) legDidNotGo(ctx context.Context, ledger chains.Ledger, t *ent.Transfer, legs []*transferLeg, leg *transferLeg, reason string) (*ent.Transfer, error) {
	if moved, err := s.otherLegMoved(ctx, ledger, t, legs, leg); err != nil || moved {
		return s.noteLegRetry(ctx, t, leg, reason)
	}
	if err := s.failTransfer(ctx, t, reason); err != nil {
		return nil, err
	}
	return s.reload(ctx, t)
}

// otherLegMoved reports whether a leg of t other than leg has moved money
// or may still: its transaction is included or pending, or one carrying its
// ref is on chain. A transfer part of which moved can no longer fail: it
// must be completed.
func (s *Service) otherLegMoved(ctx context.Context, ledger chains.Ledger, t *ent.Transfer, legs []*transferLeg, leg *transferLeg) (bool, error) {
	for _, other := range legs {
		if other == leg {
			continue
		}
		if other.hash != "" {
			r, err := ledger.Receipt(ctx, other.hash)
			if err != nil {
				return false, err
			}
			if r.State == chains.TxIncluded || r.State == chains.TxPending {
				return true, nil
			}
		}
		if _, found, err := ledger.FindTransfer(ctx, other.query(t)); err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// noteLegRetry keeps t in flight with the reason its leg did not go
// through, and forgets the leg's hash (a reverted transaction's), so that
// the reconciler sends it again with the same ref: a refused or reverted
// transfer used nothing of it (on EVM the EIP-3009 nonce is spent only by a
// transfer that succeeds).
func (s *Service) noteLegRetry(ctx context.Context, t *ent.Transfer, leg *transferLeg, reason string) (*ent.Transfer, error) {
	s.logger.WarnContext(ctx, "transfer leg to retry", "transfer", t.ID, "chain", t.Chain, "leg", leg.name(), "reason", reason)
	upd := s.cfg.DB.Ent.Transfer.UpdateOneID(t.ID).
		Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)).
		SetError(reason)
	if leg.fee {
		upd.ClearFeeTxHash()
	} else {
		upd.ClearTxHash()
	}
	leg.hash = ""
	out, err := upd.Save(ctx)
	if ent.IsNotFound(err) {
		return s.reload(ctx, t)
	}
	if err != nil {
		return nil, fmt.Errorf("transfer %s: noting %s retry: %w", t.ID, leg.name(), err)
	}
	return out, nil
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
