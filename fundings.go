package agentpay

import (
	"context"
	"fmt"
	"math/big"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/depositaddress"
	"agentpay/ent/funding"
	"agentpay/ent/wallet"
)

// Fundings (docs/money.md#outside-usdc-fundings): USDC paid to a holder
// (the treasury, a custodial wallet) from outside the service's own
// transfers, recorded so that the books (books.go) explain it. The devnet
// faucet records what it pays; an operator records an outside payment by
// its transaction (RecordFundingTx), whose amount is read from the chain,
// never typed in. A payment to a deposit address is never a funding: it is
// a payment, recorded by the deposit scan, and refunded if unwanted; nor is
// a transfer from one of the service's own addresses, which its own record
// already counts.

// Funding sources: who paid USDC into an address from outside the
// service's own transfers (ent/schema/funding.go).
const (
	FundingFaucet            = "faucet"
	FundingTreasuryLiquidity = "treasury_liquidity"
	FundingOperator          = "operator"
)

// OutsideFunding is USDC paid to an address from outside the service's
// own transfers, included on chain.
type OutsideFunding struct {
	Chain   chains.Name
	Mode    Mode
	Address string
	Amount  *big.Int
	TxHash  string
	Source  string
}

// RecordFunding records an included outside payment, so the books count
// it as an inflow of the address it paid. Recording the same transaction
// and address again changes nothing.
func (s *Service) RecordFunding(ctx context.Context, f OutsideFunding) error {
	if f.Amount == nil || f.Amount.Sign() <= 0 || !f.Amount.IsInt64() {
		return fmt.Errorf("record funding: amount %v out of range", f.Amount)
	}
	err := s.cfg.DB.Ent.Funding.Create().
		SetChain(string(f.Chain)).SetMode(funding.Mode(f.Mode)).SetAddress(f.Address).
		SetAmount(f.Amount.Int64()).SetTxHash(f.TxHash).SetSource(f.Source).
		Exec(ctx)
	if ent.IsConstraintError(err) {
		return nil
	}
	return err
}

// RecordFundingTx records what the included transaction txHash paid to
// address (the treasury or a custodial wallet) on chain in mode, read from
// the chain, as an operator's funding, and answers the amount. Refused:
// a deposit address (its payments are payments), an address the service
// does not hold, a transaction that paid the address nothing (or is not
// included yet), and one sent from an address the service holds (its own
// transfer, counted by its record).
func (s *Service) RecordFundingTx(ctx context.Context, mode Mode, chain chains.Name, address, txHash string) (*big.Int, error) {
	ledger, err := s.ledger(mode, chain)
	if err != nil {
		return nil, err
	}
	if err := ledger.ValidateAddress(address); err != nil {
		return nil, Invalid("address", "not a valid %s address", chain)
	}
	if c, err := s.wallets(chain).ParseAddress(address); err == nil {
		address = c
	}
	if txHash == "" || len(txHash) > 128 {
		return nil, Invalid("tx_hash", "required, at most 128 characters")
	}
	reader, ok := ledger.(chains.DepositReader)
	if !ok {
		return nil, Invalid("chain", "%s cannot read a transaction's transfers", chain)
	}
	held, err := s.holds(ctx, mode, chain, address)
	if err != nil {
		return nil, err
	}
	switch held {
	case BooksDepositAddresses:
		return nil, Invalid("address", "is a deposit address: what reaches it is a payment, recorded by the deposit scan, not a funding")
	case "":
		return nil, Invalid("address", "is not an address the service holds on %s in %s mode (the treasury or a custodial wallet)", chain, mode)
	}
	deps, err := reader.DepositsIn(ctx, txHash, address)
	if err != nil {
		return nil, fmt.Errorf("record funding: reading %s on %s: %w", txHash, chain, err)
	}
	total := new(big.Int)
	for _, d := range deps {
		from, err := s.holds(ctx, mode, chain, d.From)
		if err != nil {
			return nil, err
		}
		if from != "" {
			return nil, Invalid("tx_hash", "is a transfer from the service's own %s %s: its record counts it", holderNoun(from), d.From)
		}
		total.Add(total, d.Amount)
	}
	if total.Sign() == 0 {
		return nil, Invalid("tx_hash", "paid %s no USDC on %s (or is not included yet)", address, chain)
	}
	if err := s.RecordFunding(ctx, OutsideFunding{Chain: chain, Mode: mode, Address: address, Amount: total,
		TxHash: txHash, Source: FundingOperator}); err != nil {
		return nil, err
	}
	return total, nil
}

// holds answers which holder class address is on chain in mode, "" when
// the service does not hold it.
func (s *Service) holds(ctx context.Context, mode Mode, chain chains.Name, address string) (BooksHolder, error) {
	if sameAddress(chain, address, s.cfg.Treasury.Address(chain)) {
		return BooksTreasury, nil
	}
	db := s.cfg.DB.Ent
	canonical := address
	if c, err := s.wallets(chain).ParseAddress(address); err == nil {
		canonical = c
	}
	n, err := db.DepositAddress.Query().Where(depositaddress.Chain(string(chain)), depositaddress.Address(canonical)).Count(ctx)
	if err != nil {
		return "", err
	}
	if n > 0 {
		return BooksDepositAddresses, nil
	}
	if mode != s.cfg.AgentMode {
		return "", nil
	}
	w, err := db.Wallet.Query().Where(wallet.Chain(string(chain)), wallet.Address(canonical), wallet.KindEQ(wallet.KindCustodial)).First(ctx)
	switch {
	case ent.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	case w.UserID != nil:
		return BooksHumanWallets, nil
	}
	return BooksAgentWallets, nil
}
