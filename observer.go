package agentpay

import (
	"context"
	"math/big"
	"time"

	"github.com/shopspring/decimal"

	"agentpay/chains"
)

// Observer is told what the rules did, once it has committed, for the
// operator's metrics (internal/metrics implements it; cmd/agentpay wires
// it). Config.Observer nil tells no one. Its methods must be quick and must
// not fail: they are called on the paths they report.
type Observer interface {
	// PaymentStatus: a payment reached status (detected, confirming,
	// confirmed, failed).
	PaymentStatus(mode, chain, status string)
	// SendStatus: a custodial send (agent send, withdrawal) was requested,
	// completed or failed.
	SendStatus(chain, status string)
	// Settled: a settlement completed, paying net (USD) to the merchant.
	Settled(mode, chain, settlementType string, net decimal.Decimal)
	// Swept: a settlement's sweep of gross (USD) to the treasury completed.
	Swept(mode, chain string, gross decimal.Decimal)
	// Refunded: a refund of amount (USD) was included on chain.
	Refunded(mode, chain string, amount decimal.Decimal)
	// GasSpent: the treasury paid fee (in the chain's smallest native
	// unit, with its decimals) for an included transaction.
	GasSpent(mode, chain string, fee *big.Int, decimals int32)
}

type noObserver struct{}

func (noObserver) PaymentStatus(string, string, string)            {}
func (noObserver) SendStatus(string, string)                       {}
func (noObserver) Settled(string, string, string, decimal.Decimal) {}
func (noObserver) Swept(string, string, decimal.Decimal)           {}
func (noObserver) Refunded(string, string, decimal.Decimal)        {}
func (noObserver) GasSpent(string, string, *big.Int, int32)        {}

func (s *Service) observer() Observer {
	if s.cfg.Observer == nil {
		return noObserver{}
	}
	return s.cfg.Observer
}

// gasReadTimeout bounds reading the fees of a completed send or
// settlement: the answer has been decided, a slow node must not hold it.
const gasReadTimeout = 5 * time.Second

// observeGas reports what the treasury paid for the included transactions
// hashes on ledger. It costs one RPC call per transaction, so it runs only
// with an Observer; a fee it cannot read is left out (logged at debug).
func (s *Service) observeGas(ctx context.Context, mode Mode, ledger chains.Ledger, hashes ...string) {
	fr, ok := ledger.(chains.FeeReader)
	if s.cfg.Observer == nil || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gasReadTimeout)
	defer cancel()
	for _, h := range hashes {
		if h == "" {
			continue
		}
		fee, decimals, err := fr.TxFee(ctx, h)
		if err != nil {
			s.logger.DebugContext(ctx, "reading a transaction's fee for the gas metric", "chain", ledger.Chain(), "tx", h, "err", err)
			continue
		}
		s.cfg.Observer.GasSpent(string(mode), string(ledger.Chain()), fee, decimals)
	}
}
