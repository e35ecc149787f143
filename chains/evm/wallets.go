package evm

import (
	"github.com/ethereum/go-ethereum/common"

	"agentpay/chains"
)

// Wallets implements chains.Wallets for the EVM family.
type Wallets struct{}

var _ chains.Wallets = Wallets{}

func (Wallets) NewKey() ([]byte, string, error) { return NewKey() }

func (Wallets) DeriveKey(seed []byte, index uint32) ([]byte, string, error) {
	return DeriveKey(seed, index)
}

func (Wallets) AddressOf(key []byte) (string, error) { return AddressOf(key) }

// ParseAddress accepts what ValidateAddress accepts and answers its EIP-55
// checksummed form.
func (Wallets) ParseAddress(address string) (string, error) {
	if err := ValidateAddress(address); err != nil {
		return "", err
	}
	return common.HexToAddress(address).Hex(), nil
}

func (Wallets) NormalizeAddress(address string) string { return NormalizeAddress(address) }
