package x402

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// Protocol versions.
const (
	Version1 = 1
	Version2 = 2
)

// SchemeExact is the payment scheme offered: the exact amount, once.
const SchemeExact = "exact"

// Header names.
const (
	// HeaderPaymentRequired carries a v2 402's PaymentRequired.
	HeaderPaymentRequired = "PAYMENT-REQUIRED"
	// HeaderPaymentSignature carries a v2 PaymentPayload.
	HeaderPaymentSignature = "PAYMENT-SIGNATURE"
	// HeaderPaymentResponse carries a v2 payment's SettleResponse.
	HeaderPaymentResponse = "PAYMENT-RESPONSE"
	// HeaderPaymentV1 carries a v1 PaymentPayloadV1.
	HeaderPaymentV1 = "X-PAYMENT"
	// HeaderPaymentResponseV1 carries a v1 payment's SettleResponse.
	HeaderPaymentResponseV1 = "X-PAYMENT-RESPONSE"
)

// MaxHeaderBytes bounds a header the Decode functions read: a payment
// payload is a few hundred bytes in base64 (a Solana transaction at most
// 1,232 bytes before it), requirements a few per network.
const MaxHeaderBytes = 4096

// ExtensionPaymentIdentifier is the payment-identifier extension's key.
const ExtensionPaymentIdentifier = "payment-identifier"

// PaymentIDMinLen and PaymentIDMaxLen bound a payment-identifier id (16
// to 128 of A-Z, a-z, 0-9, '-' and '_', as the extension says).
const (
	PaymentIDMinLen = 16
	PaymentIDMaxLen = 128
)

// ResourceInfo is v2's description of the resource paid for.
type ResourceInfo struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// Extra is a v2 requirement's extra: on EVM the token's EIP-712 domain
// and the transfer method (eip3009); on Solana the fee payer and the memo
// the transfer carries.
type Extra struct {
	Name                string `json:"name,omitempty"`
	Version             string `json:"version,omitempty"`
	AssetTransferMethod string `json:"assetTransferMethod,omitempty"`
	FeePayer            string `json:"feePayer,omitempty"`
	Memo                string `json:"memo,omitempty"`
}

// Requirements is one entry of a v2 402's accepts, and what a v2
// payload's Accepted echoes.
type Requirements struct {
	Scheme            string `json:"scheme"`
	Network           string `json:"network"`
	Amount            string `json:"amount"`
	Asset             string `json:"asset"`
	PayTo             string `json:"payTo"`
	MaxTimeoutSeconds int    `json:"maxTimeoutSeconds"`
	Extra             Extra  `json:"extra"`
}

// PaymentIdentifier is the payment-identifier extension as a 402
// declares it (Info.Required, Schema) and a payload echoes it (Info.ID).
type PaymentIdentifier struct {
	Info struct {
		Required bool   `json:"required"`
		ID       string `json:"id,omitempty"`
	} `json:"info"`
	// Schema is the JSON schema of Info, declared in the 402; a payload
	// may echo it.
	Schema map[string]any `json:"schema"`
}

// Extensions are the extensions agentpay declares and reads.
type Extensions struct {
	PaymentIdentifier *PaymentIdentifier `json:"payment-identifier,omitempty"`
}

// PaymentRequired is what a v2 402's PAYMENT-REQUIRED carries.
type PaymentRequired struct {
	X402Version int            `json:"x402Version"`
	Error       string         `json:"error,omitempty"`
	Resource    ResourceInfo   `json:"resource"`
	Accepts     []Requirements `json:"accepts"`
	Extensions  *Extensions    `json:"extensions,omitempty"`
}

// Authorization is an EIP-3009 TransferWithAuthorization's fields as
// x402's EVM exact payload carries them (decimal value and times, 0x hex
// addresses and nonce); its signature is Payload.Signature.
type Authorization struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
}

// Payload is the exact scheme's payload: Signature and Authorization on
// EVM, Transaction (the payer-signed transaction, base64) on Solana.
type Payload struct {
	Signature     string        `json:"signature,omitempty"`
	Authorization Authorization `json:"authorization"`
	Transaction   string        `json:"transaction,omitempty"`
}

// PaymentPayload is the JSON in a PAYMENT-SIGNATURE header, and a v2
// facilitator request's paymentPayload.
type PaymentPayload struct {
	X402Version int           `json:"x402Version"`
	Resource    *ResourceInfo `json:"resource,omitempty"`
	Accepted    Requirements  `json:"accepted"`
	Payload     Payload       `json:"payload"`
	Extensions  *Extensions   `json:"extensions,omitempty"`
}

// PaymentID is the payload's payment-identifier id, "" when it carries
// none; ValidPaymentID tells whether it is well formed.
func (p *PaymentPayload) PaymentID() string {
	if p.Extensions == nil || p.Extensions.PaymentIdentifier == nil {
		return ""
	}
	return p.Extensions.PaymentIdentifier.Info.ID
}

// SetPaymentID names the payment id (the payment-identifier extension):
// a retry under the same id is the same payment.
func (p *PaymentPayload) SetPaymentID(id string) {
	if p.Extensions == nil {
		p.Extensions = &Extensions{}
	}
	if p.Extensions.PaymentIdentifier == nil {
		p.Extensions.PaymentIdentifier = &PaymentIdentifier{}
	}
	p.Extensions.PaymentIdentifier.Info.ID = id
}

// ValidPaymentID tells an id the extension allows: PaymentIDMinLen to
// PaymentIDMaxLen letters, digits, '-' or '_'.
func ValidPaymentID(id string) bool {
	return len(id) >= PaymentIDMinLen && len(id) <= PaymentIDMaxLen &&
		strings.TrimLeft(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}

// NewPaymentID is a fresh payment id: 32 URL-safe base64 characters of
// 24 random bytes.
func NewPaymentID() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// PaymentIdentifierSchema is the extension's declared schema (x402's
// specs/extensions/payment_identifier.md).
func PaymentIdentifierSchema() map[string]any {
	return map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"properties": map[string]any{
			"required": map[string]any{"type": "boolean"},
			"id":       map[string]any{"type": "string", "minLength": PaymentIDMinLen, "maxLength": PaymentIDMaxLen},
		},
		"required": []any{"required"},
	}
}

// SettleResponse is what PAYMENT-RESPONSE (and v1's X-PAYMENT-RESPONSE)
// carries and a facilitator's settle answers.
type SettleResponse struct {
	Success     bool   `json:"success"`
	ErrorReason string `json:"errorReason,omitempty"`
	Transaction string `json:"transaction"`
	Network     string `json:"network"`
	Payer       string `json:"payer"`
}

// VerifyResponse is a facilitator's verify answer.
type VerifyResponse struct {
	IsValid       bool   `json:"isValid"`
	InvalidReason string `json:"invalidReason,omitempty"`
	Payer         string `json:"payer"`
}

// FacilitatorRequest is what a v2 facilitator's verify and settle take.
type FacilitatorRequest struct {
	X402Version         int            `json:"x402Version"`
	PaymentPayload      PaymentPayload `json:"paymentPayload"`
	PaymentRequirements Requirements   `json:"paymentRequirements"`
}

// SupportedKind is one kind a facilitator's supported lists.
type SupportedKind struct {
	X402Version int    `json:"x402Version"`
	Scheme      string `json:"scheme"`
	Network     string `json:"network"`
	// Extra is the kind's extra: on Solana the fee payer.
	Extra *Extra `json:"extra,omitempty"`
}

// Supported is what a facilitator's supported answers.
type Supported struct {
	Kinds      []SupportedKind `json:"kinds"`
	Extensions []string        `json:"extensions"`
	// Signers are the facilitator's relaying addresses per CAIP-2 family
	// ("eip155:*", "solana:*"): the accounts that send the transactions
	// and pay their fees.
	Signers map[string][]string `json:"signers"`
}

// EVMNetwork is the CAIP-2 network of an EVM chain id.
func EVMNetwork(chainID uint64) string { return "eip155:" + strconv.FormatUint(chainID, 10) }

// EVMChainID is the chain id an eip155 CAIP-2 network names: decimal,
// no leading zero, no sign.
func EVMChainID(network string) (uint64, bool) {
	ref, ok := strings.CutPrefix(network, "eip155:")
	if !ok || ref == "" || len(ref) > 20 || strings.TrimLeft(ref, "0123456789") != "" || ref[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseUint(ref, 10, 64)
	if err != nil {
		return 0, false
	}
	return id, true
}

// Solana's clusters as CAIP-2 networks, the three x402 clients know.
const (
	SolanaMainnet = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
	SolanaDevnet  = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
	SolanaTestnet = "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z"
)

// SolanaNetwork is the CAIP-2 network of the Solana cluster whose genesis
// hash (base58, as getGenesisHash answers) is genesisHash: "solana:" and
// its first 32 characters.
func SolanaNetwork(genesisHash string) string {
	if len(genesisHash) > 32 {
		genesisHash = genesisHash[:32]
	}
	return "solana:" + genesisHash
}

// IsSolanaNetwork tells a Solana CAIP-2 network from an EVM one.
func IsSolanaNetwork(network string) bool { return strings.HasPrefix(network, "solana:") }

// HeaderError is a header that does not decode: too long, not base64, or
// not the JSON of what it carries. Nothing it says comes from the header.
type HeaderError struct {
	Header string
	Reason string
}

func (e *HeaderError) Error() string { return e.Header + ": " + e.Reason }

// EncodeHeader is v's JSON in standard base64, as every x402 header
// carries it.
func EncodeHeader(v any) (string, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(body), nil
}

// decodeHeader reads header (named name) into dst: bounded, standard or
// unpadded URL-safe base64, then JSON; what is carried is described for
// the error.
func decodeHeader(name, what, header string, dst any) error {
	if len(header) > MaxHeaderBytes {
		return &HeaderError{Header: name, Reason: "must be at most " + strconv.Itoa(MaxHeaderBytes) + " bytes"}
	}
	header = strings.TrimSpace(header)
	raw, err := base64.StdEncoding.DecodeString(header)
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(header, "=")); err != nil {
			return &HeaderError{Header: name, Reason: "must be base64 of the " + what + "'s JSON"}
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return &HeaderError{Header: name, Reason: "must be base64 of the " + what + "'s JSON: " + err.Error()}
	}
	return nil
}

// DecodePaymentSignature reads a PAYMENT-SIGNATURE header.
func DecodePaymentSignature(header string) (*PaymentPayload, error) {
	var p PaymentPayload
	if err := decodeHeader(HeaderPaymentSignature, "payment payload", header, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DecodePaymentRequired reads a PAYMENT-REQUIRED header.
func DecodePaymentRequired(header string) (*PaymentRequired, error) {
	var p PaymentRequired
	if err := decodeHeader(HeaderPaymentRequired, "payment requirements", header, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DecodePaymentResponse reads a PAYMENT-RESPONSE (or X-PAYMENT-RESPONSE)
// header.
func DecodePaymentResponse(header string) (*SettleResponse, error) {
	var p SettleResponse
	if err := decodeHeader(HeaderPaymentResponse, "settlement response", header, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
