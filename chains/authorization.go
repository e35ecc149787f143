package chains

import (
	"context"
	"errors"
	"fmt"
	"math/big"
)

// Authorization is a transfer a payer signed for someone else to execute:
// on EVM chains an EIP-3009 TransferWithAuthorization of the ledger's
// token (x402's `exact` scheme, a browser wallet's eth_signTypedData_v4).
// Whoever holds it can relay it, paying the gas; the token moves Value
// from From to To once, within (ValidAfter, ValidBefore), and refuses the
// (From, Nonce) pair ever after.
type Authorization struct {
	From  string
	To    string
	Value *big.Int
	// ValidAfter and ValidBefore are Unix seconds, compared by the token
	// with the including block's timestamp (strictly).
	ValidAfter  *big.Int
	ValidBefore *big.Int
	Nonce       [32]byte
	// Signature is the payer's 65-byte r || s || v (v 27/28 or 0/1).
	Signature []byte
}

// TokenDomain is the EIP-712 domain a payer signs an Authorization under.
type TokenDomain struct {
	Name              string
	Version           string
	ChainID           uint64
	VerifyingContract string
}

// AuthorizationRelayer is a Ledger that executes Authorizations signed by
// third parties, its gas payer paying the fee.
type AuthorizationRelayer interface {
	// TokenDomain is the token's EIP-712 domain, checked against the
	// token's own domain separator.
	TokenDomain(ctx context.Context) (TokenDomain, error)
	// VerifyAuthorization checks, without sending anything, that relaying
	// a now would move its value: the signature is From's under the
	// token's domain, the validity window holds at the chain's time (with
	// a margin for inclusion), the nonce is unused and From's balance
	// covers Value. A refusal is an *AuthorizationError.
	VerifyAuthorization(ctx context.Context, a Authorization) error
	// RelayAuthorization verifies a as VerifyAuthorization does and
	// broadcasts the token's transferWithAuthorization carrying it,
	// returning once the node accepted the transaction. The same
	// authorization relayed again while its transaction is pending or
	// included answers that transaction; one already used on chain fails
	// with an *AuthorizationError of reason AuthorizationUsed (marked
	// ErrAlreadyUsed: FindTransfer tells which transaction used it).
	RelayAuthorization(ctx context.Context, a Authorization) (Submitted, error)
}

// AuthorizationReason says why an Authorization is refused.
type AuthorizationReason string

const (
	AuthorizationMalformed    AuthorizationReason = "malformed"     // an address, value or signature that does not parse
	AuthorizationSignature    AuthorizationReason = "signature"     // not signed by From under the token's domain
	AuthorizationNotYetValid  AuthorizationReason = "not_yet_valid" // ValidAfter not passed
	AuthorizationExpired      AuthorizationReason = "expired"       // ValidBefore passed, or too close to be included
	AuthorizationUsed         AuthorizationReason = "used"          // the nonce was used or cancelled
	AuthorizationInsufficient AuthorizationReason = "insufficient"  // From holds less than Value
)

// AuthorizationError is a refused Authorization: nothing was sent.
type AuthorizationError struct {
	Reason  AuthorizationReason
	Message string
}

func (e *AuthorizationError) Error() string {
	return fmt.Sprintf("authorization refused (%s): %s", e.Reason, e.Message)
}

// Is makes an AuthorizationError ErrRefused (nothing was sent), a short
// balance ErrInsufficientFunds too; a used one is ErrAlreadyUsed instead
// (the funds may well have moved, under it).
func (e *AuthorizationError) Is(target error) bool {
	switch target {
	case ErrRefused:
		return e.Reason != AuthorizationUsed
	case ErrAlreadyUsed:
		return e.Reason == AuthorizationUsed
	case ErrInsufficientFunds:
		return e.Reason == AuthorizationInsufficient
	}
	return false
}

// RefusedAuthorization builds an *AuthorizationError.
func RefusedAuthorization(reason AuthorizationReason, format string, args ...any) error {
	return &AuthorizationError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// AuthorizationRefusal is err's *AuthorizationError, nil when it is none.
func AuthorizationRefusal(err error) *AuthorizationError {
	var ae *AuthorizationError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}
