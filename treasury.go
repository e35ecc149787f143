package agentpay

import (
	"fmt"

	"agentpay/chains"
	"agentpay/internal/vault"
)

// TreasuryKeys are the service's own wallets: on EVM chains the gas wallet
// that relays every transfer and collects the fees, on Solana the fee payer
// (which also pays rent for new token accounts). They are derived from the
// master key, so MASTER_KEY alone is enough to run the service and the
// treasury addresses never change while it does.
type TreasuryKeys struct {
	EVM           []byte `json:"-"`
	EVMAddress    string
	Solana        []byte `json:"-"`
	SolanaAddress string
}

// String redacts the keys so TreasuryKeys are safe in logs.
func (t TreasuryKeys) String() string {
	return fmt.Sprintf("TreasuryKeys{evm %s, solana %s}", t.EVMAddress, t.SolanaAddress)
}

// GoString redacts the keys for %#v.
func (t TreasuryKeys) GoString() string { return t.String() }

// Format redacts the keys for every fmt verb.
func (t TreasuryKeys) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// Address is the treasury's wallet address on chain.
func (t TreasuryKeys) Address(chain chains.Name) string {
	if chain == chains.Solana {
		return t.SolanaAddress
	}
	return t.EVMAddress
}

// Key is the treasury's signing key on chain. Never logged.
func (t TreasuryKeys) Key(chain chains.Name) []byte {
	if chain == chains.Solana {
		return t.Solana
	}
	return t.EVM
}

// DeriveTreasuryKeys derives the treasury wallets: index 0 of the vault's
// treasury seed in each family.
func DeriveTreasuryKeys(v *vault.Vault, families chains.Families) (TreasuryKeys, error) {
	seed := v.TreasurySeed()
	var t TreasuryKeys
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
			return TreasuryKeys{}, fmt.Errorf("treasury: no %s family", w.family)
		}
		var err error
		if *w.key, *w.address, err = wallets.DeriveKey(seed, 0); err != nil {
			return TreasuryKeys{}, fmt.Errorf("treasury: derive %s key: %w", w.family, err)
		}
	}
	return t, nil
}
