package chains

import (
	"context"
	"errors"
	"math/big"
)

// ExactSettler is a chain whose x402 exact payments are whole
// transactions the payer signs and the treasury co-signs as fee payer and
// submits (Solana; on EVM the payer signs an authorization instead, see
// AuthorizationRelayer). The transaction is the payload's, base64.
type ExactSettler interface {
	// FeePayer is the treasury's address, the transactions' fee payer
	// (x402's extra.feePayer).
	FeePayer() string
	// VerifyExact checks the transaction pays req exactly, under the
	// treasury as fee payer, and that it can land now (its blockhash
	// valid, the payer holding the amount): every check SettleExact runs,
	// nothing signed or sent. It answers the payment's payer and the
	// transaction's id once co-signed.
	VerifyExact(ctx context.Context, transaction string, req ExactRequest) (ExactChecked, error)
	// SettleExact checks as VerifyExact, co-signs and sends. The same
	// transaction settled again answers its id without sending twice.
	SettleExact(ctx context.Context, transaction string, req ExactRequest) (ExactSettled, error)
	// ExactPayer is the payer transaction names (the transfer's
	// authority), read without any check, for telling a refusal's payer;
	// "" when it is not an exact transaction.
	ExactPayer(transaction string) string
}

// ExactSettled is an exact payment sent: its transaction, and the
// treasury's own transaction that first opened PayTo's token account when
// it had none (its fee and rent are the treasury's; "" when none was
// needed).
type ExactSettled struct {
	Submitted
	AccountTx string
}

// ExactRequest is what an exact payment must pay: Amount base units of the
// ledger's token to PayTo, carrying Memo when it is set.
type ExactRequest struct {
	PayTo  string
	Amount *big.Int
	Memo   string
	// AnyComputeOrder takes the compute budget instructions in either
	// order: MPP's solana charge fixes none; x402's exact layout does.
	AnyComputeOrder bool
}

// ExactChecked is a verified exact payment: its payer, the id its
// transaction has once co-signed, and whether that transaction is already
// on chain or in flight (a retry of a payload settled before), and if so
// whether it failed there.
type ExactChecked struct {
	Payer  string
	TxHash string
	Known  bool
	// Failed: the transaction is on chain and failed there (it reverted
	// after it was accepted); nothing was paid, and it can never pay.
	Failed bool
}

// X402Refusal is an exact payment refused before anything was signed, told
// as x402's reason.
type X402Refusal interface {
	error
	X402Reason() string
}

// X402ReasonOf is err's x402 reason when it is such a refusal.
func X402ReasonOf(err error) (string, bool) {
	var r X402Refusal
	if errors.As(err, &r) {
		return r.X402Reason(), true
	}
	return "", false
}
