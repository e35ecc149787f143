package solana

import "agentpay/chains"

// Wallets implements chains.Wallets for Solana.
type Wallets struct{}

var _ chains.Wallets = Wallets{}

func (Wallets) NewKey() ([]byte, string, error) { return NewKey() }

func (Wallets) DeriveKey(seed []byte, index uint32) ([]byte, string, error) {
	return DeriveKey(seed, index)
}

func (Wallets) AddressOf(key []byte) (string, error) { return AddressOf(key) }

// ParseAddress accepts a base58 public key and answers it unchanged.
func (Wallets) ParseAddress(address string) (string, error) {
	if err := ValidateAddress(address); err != nil {
		return "", err
	}
	return address, nil
}

// NormalizeAddress answers address unchanged: base58 has one spelling.
func (Wallets) NormalizeAddress(address string) string { return address }
