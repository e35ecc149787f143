package agentpay

import (
	"context"
	"fmt"
	"sync"

	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/predicate"
	"agentpay/ent/wallet"
)

// Balance is an agent's (or a human user's) USDC across its custodial
// wallets (spec 2.2).
type Balance struct {
	Agent    *ent.Agent
	Balances []ChainBalance
	// TotalUSD is the exact sum of Balances (USDC counted 1:1 as USD).
	TotalUSD decimal.Decimal
}

// ChainBalance is the USDC one wallet holds on chain, as read from it.
type ChainBalance struct {
	Chain   chains.Name
	Token   string
	Balance decimal.Decimal
	Address string
}

// Balance reads the agent's custodial wallets' USDC from the chains, all at
// once, in the order solana, base. It is the on-chain balance: sends in
// flight are still in it until included. A chain not configured in the
// agents' mode is left out; a chain that does not answer makes the whole
// read fail (503) rather than show a total that is silently short.
func (s *Service) Balance(ctx context.Context, a *ent.Agent) (*Balance, error) {
	out, err := s.walletsBalance(ctx, wallet.AgentID(a.ID))
	if err != nil {
		return nil, err
	}
	out.Agent = a
	return out, nil
}

// UserBalance is Balance for a human user's custodial wallets (Agent nil).
func (s *Service) UserBalance(ctx context.Context, u *ent.User) (*Balance, error) {
	return s.walletsBalance(ctx, wallet.UserID(u.ID))
}

// walletsBalance reads the USDC of the custodial wallets owner selects.
func (s *Service) walletsBalance(ctx context.Context, owner predicate.Wallet) (*Balance, error) {
	ws, err := s.cfg.DB.Ent.Wallet.Query().
		Where(owner, wallet.KindEQ(wallet.KindCustodial)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("balance: reading wallets: %w", err)
	}
	type read struct {
		w      *ent.Wallet
		ledger chains.Ledger
	}
	var reads []read
	for _, c := range sendChainOrder {
		w := walletOn(ws, c)
		if w == nil {
			continue
		}
		ledger, err := s.agentLedger(c)
		if err != nil {
			continue
		}
		reads = append(reads, read{w, ledger})
	}
	out := &Balance{Balances: make([]ChainBalance, len(reads)), TotalUSD: decimal.Zero}
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			units, err := r.ledger.Balance(ctx, r.w.Address)
			if err != nil {
				errs[i] = err
				return
			}
			out.Balances[i] = ChainBalance{
				Chain:   r.ledger.Chain(),
				Token:   "USDC",
				Balance: FromBaseUnits(units, r.ledger.Decimals()),
				Address: r.w.Address,
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			s.logger.WarnContext(ctx, "balance read", "chain", reads[i].ledger.Chain(), "err", err)
			return nil, fmt.Errorf("%w: cannot read the balance on %s", ErrUnavailable, reads[i].ledger.Chain())
		}
	}
	for _, b := range out.Balances {
		out.TotalUSD = out.TotalUSD.Add(b.Balance)
	}
	return out, nil
}
