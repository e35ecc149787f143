package evm

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"agentpay/chains"
)

// FindTransfer reports the transaction that used the EIP-3009 authorization
// (q.From, q.Ref), i.e. the relay that carried a Transfer with that Ref, when
// that transaction moved q.Amount of the token from q.From to q.To. It asks
// the token first (authorizationState, one call): an unused authorization
// means nothing landed and the search ends there. A used one is looked up
// in the AuthorizationUsed logs, newest blocks first, so a recent transfer
// is found in the first eth_getLogs batch, and its receipt must hold the
// token's Transfer log of the amount to the recipient.
//
// Only From's signature uses its authorization, and the signature binds the
// recipient and the amount, so a used authorization that moved something
// else is a Ref reused for another transfer: not this one (found false;
// sending it again is refused as ErrAlreadyUsed).
//
// A transaction still waiting in a mempool is not found: relaying the same
// Ref again is safe, since the token lets the authorization move funds once.
func (l *Ledger) FindTransfer(ctx context.Context, q chains.TransferQuery) (string, bool, error) {
	from, err := parseAddress(q.From)
	if err != nil {
		return "", false, err
	}
	to, err := parseAddress(q.To)
	if err != nil {
		return "", false, err
	}
	if q.Amount == nil || q.Amount.Sign() <= 0 {
		return "", false, nil // nothing of the kind is ever sent
	}
	used, err := l.AuthorizationUsed(ctx, q.From, q.Ref)
	if err != nil {
		return "", false, fmt.Errorf("evm: %s: authorizationState: %w", l.cfg.Chain, err)
	}
	if !used {
		return "", false, nil
	}
	hash, found, err := l.FindAuthorization(ctx, q.From, q.Ref, 0)
	if err != nil || !found {
		return "", false, err
	}
	rc, err := l.client.TransactionReceipt(ctx, common.HexToHash(hash))
	if err != nil {
		return "", false, fmt.Errorf("evm: %s: receipt of %s: %w", l.cfg.Chain, hash, err)
	}
	if !movesToken(rc, l.token.address, from, to, q.Amount) {
		return "", false, nil
	}
	return hash, true, nil
}

// movesToken reports whether the receipt holds token's Transfer log of
// amount from `from` to `to`.
func movesToken(rc *types.Receipt, token, from, to common.Address, amount *big.Int) bool {
	if rc == nil {
		return false
	}
	for _, lg := range rc.Logs {
		if lg == nil || lg.Address != token || len(lg.Topics) != 3 || lg.Topics[0] != transferTopic || len(lg.Data) != 32 {
			continue
		}
		if common.BytesToAddress(lg.Topics[1][12:]) == from && common.BytesToAddress(lg.Topics[2][12:]) == to &&
			new(big.Int).SetBytes(lg.Data).Cmp(amount) == 0 {
			return true
		}
	}
	return false
}
