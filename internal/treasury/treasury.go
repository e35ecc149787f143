// Package treasury derives the service's own wallets from the master key.
// They are machinery, not a rule: the rules (agentpay) read them through
// agentpay.Config.Treasury; cmd/agentpay derives them at start, and tests
// (internal/testenv) derive the same keys to fund them on the devnets
// without importing the rules package.
package treasury

import (
	"fmt"

	"agentpay/chains"
	"agentpay/internal/vault"
)

// Keys are the service's own wallets: on EVM chains the gas wallet that
// relays every transfer and collects the fees, on Solana the fee payer
// (which also pays rent for new token accounts). They are derived from the
// master key, so MASTER_KEY alone is enough to run the service and the
// treasury addresses never change while it does.
type Keys struct {
	EVM           []byte `json:"-"`
	EVMAddress    string
	Solana        []byte `json:"-"`
	SolanaAddress string
}

// String redacts the keys so Keys are safe in logs.
func (t Keys) String() string {
	return fmt.Sprintf("TreasuryKeys{evm %s, solana %s}", t.EVMAddress, t.SolanaAddress)
}

// GoString redacts the keys for %#v.
func (t Keys) GoString() string { return t.String() }

// Format redacts the keys for every fmt verb.
func (t Keys) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// Address is the treasury's wallet address on chain.
func (t Keys) Address(chain chains.Name) string {
	if chain == chains.Solana {
		return t.SolanaAddress
	}
	return t.EVMAddress
}

// Key is the treasury's signing key on chain. Never logged.
func (t Keys) Key(chain chains.Name) []byte {
	if chain == chains.Solana {
		return t.Solana
	}
	return t.EVM
}

// Derive derives the treasury wallets: index 0 of the vault's treasury seed
// in each family.
func Derive(v *vault.Vault, families chains.Families) (Keys, error) {
	seed := v.TreasurySeed()
	var t Keys
	for _, w := range []struct {
		family  chains.Family
		key     *[]byte
		address *string
	}{
		{chains.FamilyEVM, &t.EVM, &t.EVMAddress},
		{chains.FamilySolana, &t.Solana, &t.SolanaAddress},
	} {
		wallets, ok := families[w.family]
		if !ok {
			return Keys{}, fmt.Errorf("treasury: no %s family", w.family)
		}
		var err error
		if *w.key, *w.address, err = wallets.DeriveKey(seed, 0); err != nil {
			return Keys{}, fmt.Errorf("treasury: derive %s key: %w", w.family, err)
		}
	}
	return t, nil
}
