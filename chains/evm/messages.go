package evm

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"agentpay/chains"
)

var _ chains.MessageSigning = Wallets{}

// typedData is m as EIP-712 typed data; its domain has name, version and
// chainId, nothing else.
func typedData(m chains.TypedMessage) apitypes.TypedData {
	fields := make([]apitypes.Type, len(m.Fields))
	message := make(apitypes.TypedDataMessage, len(m.Fields))
	for i, f := range m.Fields {
		fields[i] = apitypes.Type{Name: f.Name, Type: f.Type}
		message[f.Name] = f.Value
	}
	return apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {
				{Name: "name", Type: "string"},
				{Name: "version", Type: "string"},
				{Name: "chainId", Type: "uint256"},
			},
			m.Type: fields,
		},
		PrimaryType: m.Type,
		Domain: apitypes.TypedDataDomain{
			Name:    m.Domain.Name,
			Version: m.Domain.Version,
			ChainId: (*math.HexOrDecimal256)(big.NewInt(m.Domain.ChainID)),
		},
		Message: message,
	}
}

// typedDataJSON is typed data exactly as eth_signTypedData_v4 takes it:
// chainId a JSON number, no empty verifyingContract or salt.
type typedDataJSON struct {
	Types       apitypes.Types `json:"types"`
	PrimaryType string         `json:"primaryType"`
	Domain      typedDomain    `json:"domain"`
	Message     map[string]any `json:"message"`
}

type typedDomain struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	ChainID int64  `json:"chainId"`
}

// errNotUTF8: JSON cannot carry the string, so what a wallet would sign is
// not what Verify hashes.
var errNotUTF8 = errors.New("evm: typed data strings must be valid UTF-8")

// checkUTF8 refuses a message with a string that is not valid UTF-8: JSON
// replaces such bytes with U+FFFD, so the wallet would sign another string
// than the one Verify hashes, and strings differing only in such bytes
// would be served alike.
func checkUTF8(m chains.TypedMessage) error {
	strs := []string{m.Domain.Name, m.Domain.Version, m.Type}
	for _, f := range m.Fields {
		strs = append(strs, f.Name, f.Type, f.Value)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return errNotUTF8
		}
	}
	return nil
}

// SigningPayload is m as EIP-712 typed data for eth_signTypedData_v4.
func (Wallets) SigningPayload(m chains.TypedMessage) (json.RawMessage, error) {
	if err := checkUTF8(m); err != nil {
		return nil, err
	}
	td := typedData(m)
	return json.Marshal(typedDataJSON{
		Types:       td.Types,
		PrimaryType: td.PrimaryType,
		Domain:      typedDomain{Name: m.Domain.Name, Version: m.Domain.Version, ChainID: m.Domain.ChainID},
		Message:     td.Message,
	})
}

var errBadSignature = errors.New("evm: a signature is 65 bytes in hex (r, s, v with v 27/28 or 0/1, low s)")

// ParseSignature decodes a 65-byte r||s||v signature in hex, v 27/28 or 0/1,
// and returns it with v as 0/1. High-s (malleable) signatures are refused.
func (Wallets) ParseSignature(s string) ([]byte, error) {
	body := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if len(body) != 130 {
		return nil, errBadSignature
	}
	sig, err := hex.DecodeString(body)
	if err != nil {
		return nil, errBadSignature
	}
	if sig[64] >= 27 {
		sig[64] -= 27
	}
	r, ss := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
	if sig[64] > 1 || !crypto.ValidateSignatureValues(sig[64], r, ss, true) {
		return nil, errBadSignature
	}
	return sig, nil
}

// Verify recovers the signer of m's EIP-712 hash and compares it with
// address (in any case).
func (Wallets) Verify(m chains.TypedMessage, sig []byte, address string) (bool, error) {
	if err := checkUTF8(m); err != nil {
		return false, err
	}
	hash, _, err := apitypes.TypedDataAndHash(typedData(m))
	if err != nil {
		return false, err
	}
	pub, err := crypto.SigToPub(hash, sig)
	if err != nil {
		return false, nil
	}
	return crypto.PubkeyToAddress(*pub) == common.HexToAddress(address), nil
}
