package agentpay

import (
	"context"
	"math/big"

	"github.com/shopspring/decimal"

	"agentpay/chains"
)

// Faucet sends test USDC from a dev payer account. Only `agentpay dev` has
// one: it is backed by the local devnets.
type Faucet interface {
	// Fund transfers amount base units to address and returns once the
	// transfer is included.
	Fund(ctx context.Context, chain chains.Name, address string, amount *big.Int) (FaucetTransfer, error)
	// Chains lists the devnets the faucet pays on.
	Chains() []DevChain
}

// FaucetTransfer is a completed faucet payment.
type FaucetTransfer struct {
	TxHash string
	From   string
}

// DevChain describes one local devnet for wallets and tools.
type DevChain struct {
	Chain   chains.Name
	RPCURL  string
	ChainID uint64 // EVM only
	USDC    string // token address or mint
}

// FaucetRequest is a request for test USDC.
type FaucetRequest struct {
	Chain     string
	Address   string
	AmountUSD decimal.Decimal
}

// FaucetResult is what the faucet sent.
type FaucetResult struct {
	Chain     chains.Name
	Address   string
	AmountUSD decimal.Decimal
	TxHash    string
	From      string
}

// maxFaucetUSD keeps one request from draining the dev payer by accident.
var maxFaucetUSD = decimal.NewFromInt(1_000_000)

// DevFaucet validates a faucet request fully before sending anything.
func (s *Service) DevFaucet(ctx context.Context, req FaucetRequest) (FaucetResult, error) {
	if s.cfg.Faucet == nil {
		return FaucetResult{}, ErrNotFound
	}
	chain, err := chains.ParseName(req.Chain)
	if err != nil {
		return FaucetResult{}, Invalid("chain", "%s", err)
	}
	ledger, err := s.ledger(ModeTest, chain)
	if err != nil {
		return FaucetResult{}, err
	}
	if err := ledger.ValidateAddress(req.Address); err != nil {
		return FaucetResult{}, Invalid("address", "not a valid %s address", chain)
	}
	if !req.AmountUSD.IsPositive() {
		return FaucetResult{}, Invalid("amount_usd", "must be greater than 0")
	}
	if req.AmountUSD.GreaterThan(maxFaucetUSD) {
		return FaucetResult{}, Invalid("amount_usd", "must be at most %s", maxFaucetUSD)
	}
	units, err := ToBaseUnits("amount_usd", req.AmountUSD, ledger.Decimals())
	if err != nil {
		return FaucetResult{}, err
	}
	sent, err := s.cfg.Faucet.Fund(ctx, chain, req.Address, units)
	if err != nil {
		return FaucetResult{}, err
	}
	// Included: recorded for the books, so a wallet the faucet paid is
	// explained. The payment stands if the record fails; the books then
	// show it as a difference.
	if err := s.RecordFunding(ctx, OutsideFunding{Chain: chain, Mode: ModeTest, Address: req.Address, Amount: units,
		TxHash: sent.TxHash, Source: FundingFaucet}); err != nil {
		s.logger.ErrorContext(ctx, "faucet: recording the funding", "chain", chain, "tx", sent.TxHash, "err", err)
	}
	return FaucetResult{Chain: chain, Address: req.Address, AmountUSD: req.AmountUSD, TxHash: sent.TxHash, From: sent.From}, nil
}

// DevChains lists the local devnets, or nil outside dev.
func (s *Service) DevChains() []DevChain {
	if s.cfg.Faucet == nil {
		return nil
	}
	return s.cfg.Faucet.Chains()
}
