package agentpay

import (
	"context"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/internal/treasury"
)

// TreasuryKeys are the service's own wallets (gas payer and fee
// collector), derived from the master key by internal/treasury.
type TreasuryKeys = treasury.Keys

// treasuryBalanceTimeout bounds each chain's balance read, so one slow RPC
// cannot hold the treasury answer.
const treasuryBalanceTimeout = 5 * time.Second

// TreasuryInfo is the treasury as the public endpoint shows it.
type TreasuryInfo struct {
	FeeRate decimal.Decimal
	// FeesCollected is the sum of the fees of completed transfers, from
	// FeeTransfers transfers.
	FeesCollected decimal.Decimal
	FeeTransfers  int64
	// Wallets are the treasury's addresses on the agents' chains: solana,
	// then base.
	Wallets []TreasuryWallet
	// Message says what the treasury is for.
	Message string
}

// Treasury wallet statuses.
const (
	// TreasuryBalanceOK: Balance was read from the chain just now.
	TreasuryBalanceOK = "ok"
	// TreasuryBalanceUnavailable: the chain is not configured for the
	// agents' network, or did not answer; Balance is unknown.
	TreasuryBalanceUnavailable = "unavailable"
)

// TreasuryWallet is the treasury's address on one chain and its USDC.
type TreasuryWallet struct {
	Chain   chains.Name
	Address string
	Token   string
	// Balance is meaningful only when Status is TreasuryBalanceOK.
	Balance decimal.Decimal
	Status  string
	// Gas is what the treasury paid for transactions on this chain in the
	// agents' mode, next to the fees it collected there (treasury_gas.go).
	Gas GasReport
}

// treasuryChains are the chains agents' wallets use, in the registration
// object's order.
var treasuryChains = []chains.Name{chains.Solana, chains.Base}

// Treasury reports the fee rate, the fees collected and the treasury's
// balance on each agent chain, read from the chains concurrently. A chain
// that is not configured or does not answer shows its balance as
// unavailable instead of failing the whole answer.
func (s *Service) Treasury(ctx context.Context) (*TreasuryInfo, error) {
	totals, err := s.completedTransferTotals(ctx, true)
	if err != nil {
		return nil, err
	}
	info := &TreasuryInfo{
		FeeRate:       FeeRate,
		FeesCollected: totals.fee,
		FeeTransfers:  totals.count,
		Wallets:       make([]TreasuryWallet, len(treasuryChains)),
		Message: "Every agent-to-agent send routes " + FeeRate.Shift(2).String() +
			"% of its amount to the treasury, which pays transaction gas for all agents.",
	}
	reports, err := s.GasReports(ctx)
	if err != nil {
		return nil, err
	}
	agentMode := s.cfg.AgentMode
	var wg sync.WaitGroup
	for i, chain := range treasuryChains {
		w := TreasuryWallet{Chain: chain, Address: s.cfg.Treasury.Address(chain), Token: "USDC", Status: TreasuryBalanceUnavailable,
			Gas: GasReport{Chain: chain, Mode: agentMode, Native: nativeTokens[chain], Decimals: nativeDecimals(chain)}}
		for _, r := range reports {
			if r.Chain == chain && r.Mode == agentMode {
				w.Gas = r
			}
		}
		info.Wallets[i] = w
		ledger, err := s.agentLedger(chain)
		if err != nil || w.Address == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, treasuryBalanceTimeout)
			defer cancel()
			units, err := ledger.Balance(ctx, w.Address)
			if err != nil {
				s.logger.WarnContext(ctx, "treasury balance", "chain", chain, "err", err)
				return
			}
			info.Wallets[i].Balance = FromBaseUnits(units, ledger.Decimals())
			info.Wallets[i].Status = TreasuryBalanceOK
		}()
	}
	wg.Wait()
	return info, nil
}
