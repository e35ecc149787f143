package evm

import (
	"context"
	"fmt"

	"agentpay/chains"
)

// TEMPORARY until the relay core (branch i-x402, relay.go) is merged.

// TokenDomain is the token's EIP-712 domain, checked against the domain
// separator read at start.
func (l *Ledger) TokenDomain(ctx context.Context) (chains.TokenDomain, error) {
	name, version := "USD Coin", "2"
	if v, err := l.token.call(ctx, "name"); err == nil && v.(string) != "" {
		name = v.(string)
	}
	if v, err := l.token.call(ctx, "version"); err == nil && v.(string) != "" {
		version = v.(string)
	}
	if eip712Domain(name, version, l.chainID, l.token.address) != l.domain {
		return chains.TokenDomain{}, fmt.Errorf("evm: %s: token %s's domain separator is not that of name %q version %q",
			l.cfg.Chain, l.token.address.Hex(), name, version)
	}
	return chains.TokenDomain{Name: name, Version: version, ChainID: l.chainID.Uint64(), VerifyingContract: l.token.address.Hex()}, nil
}
