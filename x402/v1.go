package x402

import "encoding/json"

// Version 1 (deprecated; v1 clients keep using it): requirements in the
// 402's body, networks by name, the payload in X-PAYMENT.

// RequirementsV1 is one entry of a v1 402's accepts.
type RequirementsV1 struct {
	Scheme            string      `json:"scheme"`
	Network           string      `json:"network"`
	MaxAmountRequired string      `json:"maxAmountRequired"`
	Resource          string      `json:"resource"`
	Description       string      `json:"description"`
	MimeType          string      `json:"mimeType"`
	PayTo             string      `json:"payTo"`
	MaxTimeoutSeconds int         `json:"maxTimeoutSeconds"`
	Asset             string      `json:"asset"`
	Extra             DomainExtra `json:"extra"`
	// OutputSchema is the resource's, as a merchant's requirements may
	// carry it.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// DomainExtra is the token's EIP-712 domain name and version, which a v1
// client signs under.
type DomainExtra struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ChallengeV1 is a v1 402's body.
type ChallengeV1 struct {
	X402Version int              `json:"x402Version"`
	Error       string           `json:"error"`
	Accepts     []RequirementsV1 `json:"accepts"`
}

// EVMPayloadV1 is v1's exact payload on EVM.
type EVMPayloadV1 struct {
	Signature     string        `json:"signature"`
	Authorization Authorization `json:"authorization"`
}

// PaymentPayloadV1 is the JSON in an X-PAYMENT header, and a v1
// facilitator request's paymentPayload.
type PaymentPayloadV1 struct {
	X402Version int          `json:"x402Version"`
	Scheme      string       `json:"scheme"`
	Network     string       `json:"network"`
	Payload     EVMPayloadV1 `json:"payload"`
}

// FacilitatorRequestV1 is what a v1 facilitator's verify and settle take.
type FacilitatorRequestV1 struct {
	X402Version         int              `json:"x402Version"`
	PaymentPayload      PaymentPayloadV1 `json:"paymentPayload"`
	PaymentRequirements RequirementsV1   `json:"paymentRequirements"`
}

// networksV1 are the v1 network names whose EIP-712 chain id a v1 client
// derives from the name (so a server may offer a chain under its name
// only when its node is on that id).
var networksV1 = map[string]uint64{
	"base": 8453, "base-sepolia": 84532,
	"polygon": 137, "polygon-amoy": 80002,
	"avalanche": 43114, "avalanche-fuji": 43113,
}

// NetworkV1ChainID is the chain id a v1 network name signs for.
func NetworkV1ChainID(network string) (uint64, bool) {
	id, ok := networksV1[network]
	return id, ok
}

// DecodePaymentV1 reads an X-PAYMENT header.
func DecodePaymentV1(header string) (*PaymentPayloadV1, error) {
	var p PaymentPayloadV1
	if err := decodeHeader(HeaderPaymentV1, "payment payload", header, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
