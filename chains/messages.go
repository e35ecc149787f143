package chains

import "encoding/json"

// TypedMessage is a message the service issues for a wallet to sign, so the
// signer proves it holds the wallet's key: on EVM chains EIP-712 typed data,
// signed with eth_signTypedData_v4.
type TypedMessage struct {
	Domain MessageDomain
	// Type names the message (EIP-712's primary type). Two types hash
	// differently, so a message of one type never verifies as another.
	Type   string
	Fields []MessageField
}

// MessageDomain sets the service's messages apart from other applications'
// and from other chains'.
type MessageDomain struct {
	Name, Version string
	ChainID       int64
}

// MessageField is one field of a TypedMessage, in order. Type is "string"
// or "address".
type MessageField struct {
	Name, Type, Value string
}

// MessageSigning checks wallet signatures over TypedMessages. The Wallets of
// a family whose wallets sign them implement it too (chains/evm: EIP-712).
type MessageSigning interface {
	// SigningPayload is m as the wallet's signing call takes it, in JSON
	// (EVM: the typed data argument of eth_signTypedData_v4).
	SigningPayload(m TypedMessage) (json.RawMessage, error)
	// ParseSignature decodes a signature as a client sends it, refusing a
	// malformed (or malleable) one.
	ParseSignature(signature string) ([]byte, error)
	// Verify reports whether sig, from ParseSignature, was made over m by
	// the key of address. An error means m itself could not be hashed.
	Verify(m TypedMessage, sig []byte, address string) (bool, error)
}
