package chains

// TEMPORARY until the relay core (branch i-x402) is merged: it declares
// TokenDomain and AuthorizationRelayer.TokenDomain the same way, and this
// file then goes.

// TokenDomain is the EIP-712 domain a payer signs an Authorization under.
type TokenDomain struct {
	Name              string
	Version           string
	ChainID           uint64
	VerifyingContract string
}
