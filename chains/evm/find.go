package evm

import (
	"context"
	"fmt"
)

// FindTransfer reports the transaction that used the EIP-3009 authorization
// (from, ref), i.e. the relay that carried a Transfer with that Ref. It asks
// the token first (authorizationState, one call): an unused authorization
// means nothing landed and the search ends there. A used one is looked up
// in the AuthorizationUsed logs, newest blocks first, so a recent transfer
// is found in the first eth_getLogs batch.
//
// A transaction still waiting in a mempool is not found: relaying the same
// Ref again is safe, since the token lets the authorization move funds once.
func (l *Ledger) FindTransfer(ctx context.Context, from string, ref [32]byte) (string, bool, error) {
	used, err := l.AuthorizationUsed(ctx, from, ref)
	if err != nil {
		return "", false, fmt.Errorf("evm: %s: authorizationState: %w", l.cfg.Chain, err)
	}
	if !used {
		return "", false, nil
	}
	return l.FindAuthorization(ctx, from, ref, 0)
}
