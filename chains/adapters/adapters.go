// Package adapters wires the chain adapters (chains/evm, chains/solana) into
// the chains interfaces the service is configured with. It is the one place
// that knows which adapter serves which chain: cmd/agentpay and tests use
// it; the service itself never does.
package adapters

import (
	"agentpay/chains"
	"agentpay/chains/evm"
	"agentpay/chains/solana"
)

// Families are the wallets of every chain family.
func Families() chains.Families {
	return chains.Families{
		chains.FamilyEVM:    evm.Wallets{},
		chains.FamilySolana: solana.Wallets{},
	}
}
