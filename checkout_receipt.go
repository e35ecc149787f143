package agentpay

import (
	"context"
	"math/big"
	"net/url"

	"github.com/shopspring/decimal"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
)

// ReceiptLine is one confirmed payment of a checkout, as the hosted page's
// receipt shows it to the customer once the session is confirmed: what
// was sent on which chain, and the transaction to look it up by.
type ReceiptLine struct {
	Chain  string
	Token  string
	Amount decimal.Decimal
	TxHash string
	// TxURL is the transaction on the chain's public block explorer for
	// the session's mode; empty for a chain without a known explorer.
	TxURL string
}

// explorer is a public block explorer's transaction page: prefix, the
// hash, suffix.
type explorer struct{ prefix, suffix string }

// explorers are the transaction pages by mode and chain: the live
// mainnets, and the public test networks test mode uses.
var explorers = map[Mode]map[chains.Name]explorer{
	ModeLive: {
		chains.Base:     {"https://basescan.org/tx/", ""},
		chains.Ethereum: {"https://etherscan.io/tx/", ""},
		chains.Arbitrum: {"https://arbiscan.io/tx/", ""},
		chains.Polygon:  {"https://polygonscan.com/tx/", ""},
		chains.Solana:   {"https://solscan.io/tx/", ""},
	},
	ModeTest: {
		chains.Base:     {"https://sepolia.basescan.org/tx/", ""},
		chains.Ethereum: {"https://sepolia.etherscan.io/tx/", ""},
		chains.Arbitrum: {"https://sepolia.arbiscan.io/tx/", ""},
		chains.Polygon:  {"https://amoy.polygonscan.com/tx/", ""},
		chains.Solana:   {"https://solscan.io/tx/", "?cluster=devnet"},
	},
}

// TransactionURL is the explorer page of a transaction, or "" when the
// chain has no known explorer in that mode.
func TransactionURL(mode Mode, chain, txHash string) string {
	e, ok := explorers[mode][chains.Name(chain)]
	if !ok || txHash == "" {
		return ""
	}
	return e.prefix + url.PathEscape(txHash) + e.suffix
}

// receipt lists the confirmed payments of a session, oldest first.
func (s *Service) receipt(ctx context.Context, sess *ent.CheckoutSession) ([]ReceiptLine, error) {
	ps, err := s.cfg.DB.Ent.Payment.Query().
		Where(payment.SessionID(sess.ID), payment.StatusEQ(payment.StatusConfirmed)).
		Order(ent.Asc(payment.FieldCreatedAt)).
		All(ctx)
	if err != nil {
		return nil, err
	}
	mode := sessionMode(sess)
	lines := make([]ReceiptLine, 0, len(ps))
	for _, p := range ps {
		lines = append(lines, ReceiptLine{
			Chain: p.Chain, Token: p.Token, TxHash: p.TxHash,
			Amount: FromBaseUnits(big.NewInt(p.AmountToken), USDCDecimals),
			TxURL:  TransactionURL(mode, p.Chain, p.TxHash),
		})
	}
	return lines, nil
}
