package agentpay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
	"agentpay/internal/idempotency"
)

// Withdrawals: a signed-in human moves USDC from their custodial wallet to
// an address outside the service (docs/humans.md, "Withdraw").
//
// A withdrawal is a send (transfer_agent_sends.go) whose sender is a user and whose
// recipient is an external address instead of a party: the same amount
// rules, the same 0.1% fee leg to the treasury (TransferFee), the same
// no-overdraft rule under the wallet lock, the same gasless broadcast (the
// treasury relays EIP-3009 on EVM and pays the fees, and the rent of a
// token account it must create, on Solana), and the same reconciler
// finishes it after a crash. What differs is who may and how much: users
// have no trust tier, so their limits are the service's (WithdrawalLimits),
// and the address is checked for the chain and refused when it is the
// user's own wallet or the treasury. How it ends is told to the user as an
// account event (withdrawal.completed, withdrawal.failed).

// Default withdrawal limits (USD). A human's wallet holds their own money,
// but signing in takes only their mailbox (or a passkey): the limits bound
// what a stolen mailbox or browser session can take out in a day, while a
// person's ordinary withdrawals stay well inside them. Operators change
// them with WITHDRAWAL_LIMIT_USD and WITHDRAWAL_DAILY_LIMIT_USD.
var (
	DefaultWithdrawalLimit      = decimal.NewFromInt(10_000)
	DefaultWithdrawalDailyLimit = decimal.NewFromInt(25_000)
)

// WithdrawalLimits bound a user's withdrawals: PerWithdrawal each, Daily
// their sum since 00:00 UTC (completed and in flight). A zero field is its
// default.
type WithdrawalLimits struct {
	PerWithdrawal decimal.Decimal
	Daily         decimal.Decimal
}

// withdrawalLimits are the configured limits with the defaults filled in.
func (s *Service) withdrawalLimits() WithdrawalLimits {
	l := s.cfg.Withdrawals
	if !l.PerWithdrawal.IsPositive() {
		l.PerWithdrawal = DefaultWithdrawalLimit
	}
	if !l.Daily.IsPositive() {
		l.Daily = DefaultWithdrawalDailyLimit
	}
	return l
}

// WithdrawalAddressMaxLen bounds the address input (an EVM address is 42
// characters, a Solana one at most 44).
const WithdrawalAddressMaxLen = 100

// WithdrawRequest is a signed-in human's withdrawal.
type WithdrawRequest struct {
	// ToAddress is the external wallet: an EVM address (0x and 40 hex
	// digits; mixed case must be a valid EIP-55 checksum) for base, a
	// Solana wallet (base58 public key, the owner, not a token account).
	ToAddress string
	AmountUSD decimal.Decimal
	// Chain is optional: "" is the first of solana, base whose address
	// format ToAddress has and whose available balance covers the amount
	// (an address has one chain's format, so in practice it names the
	// chain).
	Chain string
	Memo  string
	// Wait bounds how long Withdraw waits for inclusion; 0 means
	// DefaultSendWait.
	Wait time.Duration
	// StepUp proves the user is at hand (human_stepups.go): a step-up begun for
	// exactly this withdrawal's fields.
	StepUp StepUpProof

	// IdempotencyKey makes the withdrawal safe to retry (GraphQL's
	// idempotencyKey): nil runs it without one.
	IdempotencyKey *string

	// claim is the key's claim the withdrawal runs under (Withdraw).
	claim *idempotency.Claim
}

// withdrawOperation names a withdrawal for its idempotency key.
const withdrawOperation = "withdraw"

// Withdrawal is a withdrawal as answered to the user.
type Withdrawal struct {
	Transfer  *ent.Transfer
	Chain     chains.Name
	ToAddress string
	// Amount is what the user's wallet is debited, Delivered what reaches
	// ToAddress (Amount - Fee), Fee what the treasury receives.
	Amount, Delivered, Fee decimal.Decimal
	// TxHash is the transfer to ToAddress ("" while not broadcast),
	// FeeTxHash the fee to the treasury.
	TxHash, FeeTxHash string
	// TxURL is the transfer to ToAddress on the chain's public block
	// explorer, in the agents' mode (their wallets' network); "" before it
	// is broadcast or for a chain without a known explorer.
	TxURL string
	// Status is completed, failed, or pending (recorded or broadcast, not
	// yet included: the worker finishes it).
	Status  string
	Message string
	// CreatedAt is when it was recorded.
	CreatedAt time.Time
}

// withdraw moves USDC from the viewer's custodial wallet to an external
// address, routing the 0.1% fee to the treasury; it answers once both legs
// are included, or pending after req.Wait. It needs a step-up begun for
// exactly this withdrawal (req.StepUp, human_stepups.go): a passkey assertion
// when the user has a passkey, else the link e-mailed to them, followed;
// checked after the request's own checks, so a refused request spends
// none.
//
// Refusals (each changes nothing): amount below 0.01 or with more than 6
// decimals, unknown chain or one users hold no wallet on, an address that
// is not one of the chain (or, without a chain, of solana or base), the
// user's own wallet or the treasury, memo over 500 bytes
// (ValidationError); over the per-withdrawal or daily limit
// (ErrForbidden, naming it); no step-up, or one not for this withdrawal
// (ErrForbidden); available balance short (ErrInsufficientFunds). The
// balance rule is a send's: the on-chain balance minus the user's transfers
// in flight from the wallet, under the wallet lock, so concurrent
// withdrawals never spend the same money twice.
func (s *Service) withdraw(ctx context.Context, v *Viewer, req WithdrawRequest) (*Withdrawal, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	u := v.User
	w, err := s.checkWithdrawal(ctx, u, req)
	if err != nil {
		return nil, err
	}
	if err := s.spendStepUp(ctx, u, w.target, req.StepUp); err != nil {
		return nil, err
	}
	from, units, limits := w.from, w.units, w.limits
	t, err := s.recordTransfer(ctx, &outgoing{
		kind: transfer.KindWithdrawal, from: from, external: w.external, candidates: w.candidates, units: units, amount: req.AmountUSD, memo: req.Memo,
		claim: req.claim,
		underLock: func(ctx context.Context, tx *ent.Tx) error {
			sent, err := sentToday(ctx, tx.Transfer, from, s.now())
			if err != nil {
				return err
			}
			if USDCAmount(sent + units).GreaterThan(limits.Daily) {
				return fmt.Errorf("%w: %s USD exceeds the daily withdrawal limit of %s USD (%s USD already withdrawn today)",
					ErrForbidden, req.AmountUSD, limits.Daily, USDCAmount(sent))
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	t, err = s.startTransfer(ctx, t, waitOrDefault(req.Wait))
	if err != nil {
		return nil, err
	}
	return s.withdrawalOf(t), nil
}

// checkedWithdrawal is a withdrawal request that passed its own checks.
type checkedWithdrawal struct {
	from       holder
	units      int64
	limits     WithdrawalLimits
	external   map[chains.Name]string
	candidates []chains.Name
	// target is the step-up it needs.
	target stepUpTarget
}

// checkWithdrawal checks a withdrawal's fields (Withdraw's refusals but
// the balance and the daily limit, which are checked under the wallet
// lock) and names the step-up it needs.
func (s *Service) checkWithdrawal(ctx context.Context, u *ent.User, req WithdrawRequest) (*checkedWithdrawal, error) {
	units, err := validateSendAmount(req.AmountUSD)
	if err != nil {
		return nil, err
	}
	var chain chains.Name
	if strings.TrimSpace(req.Chain) != "" {
		if chain, err = chains.ParseName(req.Chain); err != nil {
			return nil, Invalid("chain", "%s", err)
		}
		if !agentChain(chain) {
			return nil, Invalid("chain", "users hold wallets on solana and base only, not %s", chain)
		}
	}
	if len(req.Memo) > 500 { // bytes, as the column's limit counts them
		return nil, Invalid("memo", "must be at most 500 bytes")
	}
	limits := s.withdrawalLimits()
	if req.AmountUSD.GreaterThan(limits.PerWithdrawal) {
		return nil, fmt.Errorf("%w: %s USD exceeds the per-withdrawal limit of %s USD",
			ErrForbidden, req.AmountUSD, limits.PerWithdrawal)
	}
	from := userHolder(u)
	external, candidates, err := s.withdrawalDestinations(ctx, from, req.ToAddress, chain)
	if err != nil {
		return nil, err
	}
	if candidates, err = s.withinSendMinimums(candidates, chain, req.AmountUSD); err != nil {
		return nil, err
	}
	where := ""
	if chain != "" {
		where = " on " + string(chain)
	}
	return &checkedWithdrawal{from: from, units: units, limits: limits, external: external, candidates: candidates,
		target: stepUpTarget{action: StepUpWithdraw, subject: withdrawalSubject(req),
			summary: fmt.Sprintf("withdraw %s USDC from your agentpay account %s to %s%s",
				req.AmountUSD, u.Username, external[candidates[0]], where)}}, nil
}

// withdrawalTarget is the step-up target of a withdrawal (BeginStepUp):
// the request checked as Withdraw will check it.
func (s *Service) withdrawalTarget(ctx context.Context, u *ent.User, req WithdrawRequest) (stepUpTarget, error) {
	w, err := s.checkWithdrawal(ctx, u, req)
	if err != nil {
		return stepUpTarget{}, err
	}
	return w.target, nil
}

// withdrawalDestinations checks a withdrawal's address against the
// candidate chains (chain, or solana then base): it answers the address in
// each chain's canonical form where it is one of that chain's, and the
// chains it fits, in order. Refused: no chain's address, the user's own
// wallet, the treasury.
func (s *Service) withdrawalDestinations(ctx context.Context, from holder, raw string, chain chains.Name) (map[chains.Name]string, []chains.Name, error) {
	address := strings.TrimSpace(raw)
	switch {
	case address == "":
		return nil, nil, Invalid("to_address", "is required")
	case len(address) > WithdrawalAddressMaxLen:
		return nil, nil, Invalid("to_address", "must be at most %d characters", WithdrawalAddressMaxLen)
	}
	candidates := sendChainOrder
	if chain != "" {
		candidates = []chains.Name{chain}
	}
	own, err := from.wallets(s.cfg.DB.Ent).All(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("withdraw: reading wallets: %w", err)
	}
	out := make(map[chains.Name]string, len(candidates))
	var fits []chains.Name
	for _, c := range candidates {
		canonical, err := s.wallets(c).ParseAddress(address)
		if err != nil {
			continue
		}
		for _, w := range own {
			if chains.Name(w.Chain).Family() == c.Family() && sameAddress(c, w.Address, canonical) {
				return nil, nil, Invalid("to_address", "is your own %s wallet: withdraw to an address outside agentpay", w.Chain)
			}
		}
		if sameAddress(c, s.cfg.Treasury.Address(c), canonical) {
			return nil, nil, Invalid("to_address", "is the service's treasury, not a wallet of yours")
		}
		out[c] = canonical
		fits = append(fits, c)
	}
	if len(fits) == 0 {
		if chain != "" {
			return nil, nil, Invalid("to_address", "is not a %s address", chainDisplay(chain))
		}
		return nil, nil, Invalid("to_address", "is neither a Solana nor a Base address")
	}
	return out, fits, nil
}

// sameAddress compares two addresses of chain: EVM addresses whatever
// their case (the checksum is only a spelling), Solana ones exactly.
func sameAddress(c chains.Name, a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if c.IsEVM() {
		return strings.EqualFold(a, b)
	}
	return a == b
}

func chainDisplay(c chains.Name) string {
	if c == chains.Solana {
		return "Solana"
	}
	if c == chains.Base {
		return "Base"
	}
	return string(c)
}

// withdrawalOf is a withdrawal's answer from its transfer row as it is.
func (s *Service) withdrawalOf(t *ent.Transfer) *Withdrawal {
	w := &Withdrawal{
		Transfer:  t,
		Chain:     chains.Name(t.Chain),
		ToAddress: t.ToAddress,
		Amount:    USDCAmount(t.Amount),
		Delivered: USDCAmount(t.Net),
		Fee:       USDCAmount(t.Fee),
		TxHash:    t.TxHash,
		FeeTxHash: t.FeeTxHash,
		TxURL:     TransactionURL(s.cfg.AgentMode, t.Chain, t.TxHash),
		Status:    string(t.Status),
		CreatedAt: t.CreatedAt,
	}
	if t.Status == transfer.StatusSubmitted {
		w.Status = string(transfer.StatusPending)
	}
	amount, delivered, fee := usd(w.Amount), usd(w.Delivered), usd(w.Fee)
	switch t.Status {
	case transfer.StatusCompleted:
		w.Message = fmt.Sprintf("Withdrew %s USDC to %s on %s: %s USDC delivered, %s USDC (0.1%% fee) routed to the treasury.",
			amount, t.ToAddress, t.Chain, delivered, fee)
	case transfer.StatusFailed:
		w.Message = fmt.Sprintf("Withdrawal of %s USDC to %s on %s failed, nothing moved: %s", amount, t.ToAddress, t.Chain, t.Error)
	default:
		w.Message = fmt.Sprintf("Withdrawal of %s USDC to %s on %s is pending on-chain inclusion: %s USDC will be delivered and %s USDC (0.1%% fee) routed to the treasury.",
			amount, t.ToAddress, t.Chain, delivered, fee)
	}
	return w
}

// Withdrawals lists the user's withdrawals, newest first, at most limit
// (1 to MaxPageSize; nil is DefaultPageSize).
func (s *Service) Withdrawals(ctx context.Context, u *ent.User, limit *int) ([]*Withdrawal, error) {
	n := DefaultPageSize
	if limit != nil {
		if *limit < 1 || *limit > MaxPageSize {
			return nil, Invalid("limit", "must be from 1 to %d", MaxPageSize)
		}
		n = *limit
	}
	ts, err := s.cfg.DB.Ent.Transfer.Query().
		Where(transfer.FromUserID(u.ID)).
		Order(ent.Desc(transfer.FieldCreatedAt), ent.Desc(transfer.FieldID)).
		Limit(n).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading withdrawals: %w", err)
	}
	out := make([]*Withdrawal, len(ts))
	for i, t := range ts {
		out[i] = s.withdrawalOf(t)
	}
	return out, nil
}

// withdrawalEventData is the data of withdrawal.completed and
// withdrawal.failed.
type withdrawalEventData struct {
	TransactionID uuid.UUID `json:"transaction_id"`
	Chain         string    `json:"chain"`
	ToAddress     string    `json:"to_address"`
	// Amounts are JSON numbers, exact: debited, delivered, fee.
	AmountUSD    json.Number `json:"amount_usd"`
	DeliveredUSD json.Number `json:"delivered_usd"`
	FeeUSD       json.Number `json:"fee_usd"`
	Status       string      `json:"status"`
	TxHash       string      `json:"tx_hash,omitempty"`
	Memo         string      `json:"memo,omitempty"`
	Error        string      `json:"error,omitempty"`
}

func withdrawalEventDataOf(t *ent.Transfer) withdrawalEventData {
	return withdrawalEventData{
		TransactionID: t.ID, Chain: t.Chain, ToAddress: t.ToAddress,
		AmountUSD:    json.Number(USDCAmount(t.Amount).String()),
		DeliveredUSD: json.Number(USDCAmount(t.Net).String()),
		FeeUSD:       json.Number(USDCAmount(t.Fee).String()),
		Status:       string(t.Status), TxHash: t.TxHash, Memo: t.Memo, Error: t.Error,
	}
}

// withdrawFingerprinted is a withdrawal's canonical form: what the service
// acts on (the address trimmed, the amount as a number).
type withdrawFingerprinted struct {
	ToAddress string `json:"to_address"`
	AmountUSD string `json:"amount_usd"`
	Memo      string `json:"memo"`
	Chain     string `json:"chain"`
}

// withdrawalAnswer is a withdrawal's answer as kept.
type withdrawalAnswer struct {
	TransferID uuid.UUID       `json:"transfer_id"`
	Chain      string          `json:"chain"`
	ToAddress  string          `json:"to_address"`
	Amount     decimal.Decimal `json:"amount"`
	Delivered  decimal.Decimal `json:"delivered"`
	Fee        decimal.Decimal `json:"fee"`
	TxHash     string          `json:"tx_hash"`
	FeeTxHash  string          `json:"fee_tx_hash"`
	Status     string          `json:"status"`
	Message    string          `json:"message"`
}

func withdrawalAnswerOf(w *Withdrawal) *withdrawalAnswer {
	return &withdrawalAnswer{
		TransferID: w.Transfer.ID, Chain: string(w.Chain), ToAddress: w.ToAddress, Amount: w.Amount,
		Delivered: w.Delivered, Fee: w.Fee, TxHash: w.TxHash, FeeTxHash: w.FeeTxHash, Status: w.Status, Message: w.Message,
	}
}

// Withdraw is the signed-in human's withdrawal (withdraw), under
// req.IdempotencyKey when set: the one entry point of a withdrawal. The
// same key and request answer the first withdrawal again (replayed), as
// it was answered (internal/idempotency); keys are the user's own: an
// agent's equal key never meets them.
func (s *Service) Withdraw(ctx context.Context, v *Viewer, req WithdrawRequest) (res *Withdrawal, replayed bool, err error) {
	if v == nil || v.User == nil {
		return nil, false, ErrNotSignedIn
	}
	key, err := parsedKey(req.IdempotencyKey)
	if err != nil {
		return nil, false, err
	}
	return idempotency.Do(ctx, s.idem, idempotency.Op[*Withdrawal]{
		Request: idempotency.Request{
			Scope: userIdempotencyScope(v.User.ID), Key: key, Operation: withdrawOperation,
			Canonical: withdrawFingerprinted{
				ToAddress: strings.TrimSpace(req.ToAddress), AmountUSD: req.AmountUSD.String(), Memo: req.Memo, Chain: req.Chain,
			},
		},
		Run: func(ctx context.Context, claim *idempotency.Claim) (*Withdrawal, error) {
			req.claim = claim
			return s.withdraw(ctx, v, req)
		},
		Keep: func(w *Withdrawal) any { return withdrawalAnswerOf(w) },
		Replay: func(ctx context.Context, kept json.RawMessage) (*Withdrawal, error) {
			var a withdrawalAnswer
			if err := json.Unmarshal(kept, &a); err != nil {
				return nil, fmt.Errorf("idempotency key: unreadable withdrawal: %w", err)
			}
			t, err := s.cfg.DB.Ent.Transfer.Get(ctx, a.TransferID)
			if err != nil {
				return nil, fmt.Errorf("idempotency key: transfer: %w", err)
			}
			return &Withdrawal{
				Transfer: t, Chain: chains.Name(a.Chain), ToAddress: a.ToAddress, Amount: a.Amount, Delivered: a.Delivered,
				Fee: a.Fee, TxHash: a.TxHash, FeeTxHash: a.FeeTxHash, TxURL: TransactionURL(s.cfg.AgentMode, a.Chain, a.TxHash),
				Status: a.Status, Message: a.Message, CreatedAt: t.CreatedAt,
			}, nil
		},
		Recover: func(ctx context.Context, transferID uuid.UUID) (*Withdrawal, error) {
			t, err := s.cfg.DB.Ent.Transfer.Get(ctx, transferID)
			if err != nil {
				return nil, fmt.Errorf("transfer: %w", err)
			}
			return s.withdrawalOf(t), nil
		},
	})
}
