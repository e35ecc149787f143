package chains

import "math/big"

// Family is a set of chains whose wallets are alike: one key format, one
// address format (a key has the same address on every chain of its family)
// and one derivation path for deposit keys.
type Family string

const (
	FamilyEVM    Family = "evm"
	FamilySolana Family = "solana"
)

// Family is the family of chain n.
func (n Name) Family() Family {
	if n == Solana {
		return FamilySolana
	}
	return FamilyEVM
}

// Wallets is what the service does with the wallets of one family without a
// connection to a chain: make and derive keys, and read addresses. The
// family's adapter implements it (chains/evm, chains/solana).
type Wallets interface {
	// NewKey generates a custodial key and returns it with its address.
	NewKey() (key []byte, address string, err error)
	// DeriveKey derives the key at index (below 2^31) from seed on the
	// family's usual wallet path, so a derived key can be imported into a
	// standard wallet if ever needed.
	DeriveKey(seed []byte, index uint32) (key []byte, address string, err error)
	// AddressOf is the address a key signs for.
	AddressOf(key []byte) (string, error)
	// ParseAddress returns a wallet address of the family in its canonical
	// form (EVM: EIP-55 checksummed), or ErrInvalidAddress.
	ParseAddress(address string) (string, error)
	// NormalizeAddress is the form the family's watchers report addresses
	// in and Watchlist.Contains takes. It does not validate.
	NormalizeAddress(address string) string
	// PaymentURI is the request a payer's wallet app scans (or opens) to
	// pay r: EIP-681 on EVM chains, Solana Pay on Solana.
	PaymentURI(r PaymentRequest) string
}

// PaymentRequest is a payment a payer's wallet is asked to make.
type PaymentRequest struct {
	// ChainID is the EVM chain id; unused on Solana.
	ChainID uint64
	// Token is the token contract (EVM) or mint (Solana).
	Token    string
	Decimals int32
	// To is the recipient wallet (on Solana the owner: the paying wallet
	// sends to its associated token account).
	To string
	// Amount in the token's base units.
	Amount *big.Int
	// Label and Message are shown by wallets that support them (Solana
	// Pay); empty ones are left out.
	Label, Message string
}

// Families holds the Wallets of each family the service works with.
type Families map[Family]Wallets
