package agentpay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/merchant"
	"agentpay/ent/settlementbatch"
	"agentpay/payout"
)

// batchRun is one run paying one batch.
type batchRun struct {
	s    *Service
	opts SettlementOptions
	b    *ent.SettlementBatch
	m    *ent.Merchant
}

// errBatchTaken: another run touched the batch since this one read it; that
// run pays it.
var errBatchTaken = errors.New("settlement batch: being paid by another run")

// errBatchClosed: completed by another run.
var errBatchClosed = errors.New("settlement batch closed by another run")

// pay pays the batch's net and completes it: "" once completed, or what it
// waits for.
func (br *batchRun) pay(ctx context.Context) (string, error) {
	var (
		out     payoutOutcome
		waiting string
		err     error
	)
	switch br.b.SettlementType {
	case string(merchant.SettlementTypeFiatPix):
		out, waiting, err = br.fiatPayout(ctx)
	default:
		out, waiting, err = br.cryptoPayout(ctx)
	}
	if errors.Is(err, errBatchTaken) {
		return err.Error(), nil
	}
	if err != nil || waiting != "" {
		return waiting, err
	}
	return "", br.s.completeBatch(ctx, br.b, out)
}

// payoutOutcome is what the merchant was paid, for the completing step.
type payoutOutcome struct {
	reference string
	chain     string
	address   string
	txHash    string
	fxRate    string
	amount    string
	currency  string
}

func (br *batchRun) mode() Mode { return sessionModeOf(br.b.Livemode) }

func (br *batchRun) paidDecimals() (int32, error) {
	l, err := br.s.ledger(br.mode(), chains.Name(br.b.Chain))
	if err != nil {
		return 0, err
	}
	return l.Decimals(), nil
}

func (br *batchRun) netUSD() (decimal.Decimal, error) {
	decimals, err := br.paidDecimals()
	if err != nil {
		return decimal.Zero, err
	}
	return FromBaseUnits(big.NewInt(br.b.Net), decimals), nil
}

func (br *batchRun) cryptoPayout(ctx context.Context) (payoutOutcome, string, error) {
	chain, address := chains.Name(br.b.PayoutChain), br.b.PayoutAddress
	if address == "" {
		// Not attempted yet: the destination is fixed now, so a merchant
		// editing its settlement address mid-payout never splits it.
		address = br.m.SettlementAddress
		chain = chains.Name(br.b.Chain)
		if br.m.SettlementChain != "" {
			chain = chains.Name(br.m.SettlementChain)
		}
		if address == "" {
			return payoutOutcome{}, "no settlement_address set for the merchant", nil
		}
		if l, err := br.s.ledger(br.mode(), chain); err == nil && l.ValidateAddress(address) != nil {
			return payoutOutcome{}, fmt.Sprintf("settlement_address %s is not an address on %s", address, chain), nil
		}
	}
	ledger, err := br.s.ledger(br.mode(), chain)
	if err != nil {
		return payoutOutcome{}, "", fmt.Errorf("settlement payout: %w", err)
	}
	usd, err := br.netUSD()
	if err != nil {
		return payoutOutcome{}, "", err
	}
	amount, err := ToBaseUnits("settlement net", usd, ledger.Decimals())
	if err != nil {
		return payoutOutcome{}, "", err
	}
	leg := &chainLeg{
		name:      "payout",
		ledger:    ledger,
		from:      br.s.cfg.Treasury.Address(chain),
		to:        address,
		amount:    amount,
		ref:       batchPayoutRef(br.b.ID),
		hash:      br.b.TxHash,
		mayBeSent: br.b.Status == settlementbatch.StatusSubmitted,
		key: func() ([]byte, error) {
			return append([]byte(nil), br.s.cfg.Treasury.Key(chain)...), nil
		},
		row: legRow{
			submit: func(ctx context.Context) error {
				return br.submit(ctx, func(u *ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne {
					return u.SetPayoutChain(string(chain)).SetPayoutAddress(address)
				})
			},
			record: func(ctx context.Context, hash string) error {
				return br.save(ctx, func(u *ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne { return u.SetTxHash(hash) })
			},
			touched: func() time.Time { return br.b.UpdatedAt },
		},
	}
	done, waiting, err := br.s.driveLeg(ctx, br.opts, leg)
	if err != nil || !done {
		return payoutOutcome{}, waiting, err
	}
	return payoutOutcome{reference: leg.hash, chain: string(chain), address: address, txHash: leg.hash}, "", nil
}

func (br *batchRun) fiatPayout(ctx context.Context) (payoutOutcome, string, error) {
	provider := br.s.cfg.Payouts[br.mode()]
	if provider == nil {
		return payoutOutcome{}, fmt.Sprintf("no fiat payout provider configured for %s mode", br.mode()), nil
	}
	usd, err := br.netUSD()
	if err != nil {
		return payoutOutcome{}, "", err
	}
	if br.b.Status != settlementbatch.StatusSubmitted {
		if err := br.save(ctx, func(u *ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne {
			return u.SetStatus(settlementbatch.StatusSubmitted)
		}); err != nil {
			return payoutOutcome{}, "", err
		}
	}
	// The provider answers the same payout for the same key, whichever run
	// asks and however often.
	res, err := provider.Payout(ctx, payout.Request{
		IdempotencyKey: "settlement:" + br.b.ID.String(),
		MerchantID:     br.m.ID,
		AmountUSD:      usd,
	})
	if errors.Is(err, payout.ErrRefused) {
		return payoutOutcome{}, "payout provider refused: " + err.Error(), nil
	}
	if err != nil {
		return payoutOutcome{}, "", fmt.Errorf("settlement payout: %w", err)
	}
	return payoutOutcome{
		reference: res.Reference,
		fxRate:    res.FXRate.String(),
		amount:    res.Amount.StringFixed(2),
		currency:  res.Currency,
	}, "", nil
}

// submit marks the batch submitted before a broadcast, with what must be
// fixed, conditionally on the updated_at this run read: errBatchTaken if
// another run touched it since.
func (br *batchRun) submit(ctx context.Context, fix func(*ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne) error {
	now := br.s.now().UTC().Truncate(time.Microsecond)
	u := br.s.cfg.DB.Ent.SettlementBatch.UpdateOne(br.b).
		Where(
			settlementbatch.StatusIn(settlementbatch.StatusPending, settlementbatch.StatusSubmitted),
			settlementbatch.UpdatedAt(br.b.UpdatedAt),
		).
		SetStatus(settlementbatch.StatusSubmitted).
		SetUpdatedAt(now)
	b, err := fix(u).Save(ctx)
	if ent.IsNotFound(err) {
		return errBatchTaken
	}
	if err != nil {
		return fmt.Errorf("settlement batch: saving: %w", err)
	}
	br.b = b
	return nil
}

// save updates the batch while it is still open.
func (br *batchRun) save(ctx context.Context, set func(*ent.SettlementBatchUpdateOne) *ent.SettlementBatchUpdateOne) error {
	u := br.s.cfg.DB.Ent.SettlementBatch.UpdateOne(br.b).
		Where(settlementbatch.StatusIn(settlementbatch.StatusPending, settlementbatch.StatusSubmitted)).
		SetUpdatedAt(br.s.now().UTC().Truncate(time.Microsecond))
	b, err := set(u).Save(ctx)
	if ent.IsNotFound(err) {
		return errBatchClosed
	}
	if err != nil {
		return fmt.Errorf("settlement batch: saving: %w", err)
	}
	br.b = b
	return nil
}

// batchPayoutRef is a batch payout's idempotency reference (chainLeg.ref).
func batchPayoutRef(batchID uuid.UUID) [32]byte {
	return sha256.Sum256(append([]byte("agentpay/settlement-batch/payout/"), batchID[:]...))
}
