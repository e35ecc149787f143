package solana

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gagliardetto/solana-go/rpc/jsonrpc"

	"agentpay/chains"
)

var (
	// ErrInsufficientFunds: the source's token account holds less USDC than
	// the transfer amount (or has no token account at all).
	ErrInsufficientFunds = chains.Mark(errors.New("solana: insufficient USDC balance"), chains.ErrInsufficientFunds)
	// ErrFeePayerFunds: the treasury cannot pay the fee or the rent of a new
	// token account.
	ErrFeePayerFunds = errors.New("solana: fee payer cannot pay fee or rent")
)

// SendError is a transaction the node refused; it was not broadcast, so it
// is chains.ErrRefused.
type SendError struct {
	Code    int
	Message string
	// Err is the transaction error of a failed preflight, as JSON
	// (for example {"InstructionError":[1,{"Custom":1}]}).
	Err string
	// Logs of the failed simulation.
	Logs []string
	kind error
}

func (e *SendError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "solana: send transaction refused (%d): %s", e.Code, e.Message)
	if e.Err != "" {
		fmt.Fprintf(&b, "; err %s", e.Err)
	}
	return b.String()
}

// Unwrap lets callers match chains.ErrRefused, and ErrInsufficientFunds or
// ErrFeePayerFunds when the node said which.
func (e *SendError) Unwrap() []error {
	if e.kind == nil {
		return []error{chains.ErrRefused}
	}
	return []error{chains.ErrRefused, e.kind}
}

// Token program error 1 and system program error 1 are both "insufficient
// funds"; which account is short follows from the failing instruction.
const customInsufficientFunds = 1

// asSendError turns a JSON-RPC error answer to sendTransaction into a
// SendError; it returns nil for transport errors, after which the node may
// or may not have the transaction.
func asSendError(err error, transferIx int) *SendError {
	var rpcErr *jsonrpc.RPCError
	if !errors.As(err, &rpcErr) {
		return nil
	}
	out := &SendError{Code: rpcErr.Code, Message: rpcErr.Message}
	data, _ := rpcErr.Data.(map[string]interface{})
	if data == nil {
		return out
	}
	if logs, ok := data["logs"].([]interface{}); ok {
		for _, l := range logs {
			if s, ok := l.(string); ok {
				out.Logs = append(out.Logs, s)
			}
		}
	}
	txErr := data["err"]
	if txErr == nil {
		return out
	}
	if raw, err := json.Marshal(txErr); err == nil {
		out.Err = string(raw)
	}
	out.kind = classifyTxError(txErr, transferIx)
	return out
}

// classifyTxError maps the transaction errors a transfer can meet for lack
// of money onto the sentinels.
func classifyTxError(txErr interface{}, transferIx int) error {
	switch v := txErr.(type) {
	case string:
		switch v {
		case "InsufficientFundsForFee", "InsufficientFundsForRent", "AccountNotFound":
			// AccountNotFound is the fee payer holding no lamports at all.
			return ErrFeePayerFunds
		}
	case map[string]interface{}:
		if _, ok := v["InsufficientFundsForRent"]; ok {
			return ErrFeePayerFunds
		}
		ie, ok := v["InstructionError"].([]interface{})
		if !ok || len(ie) != 2 {
			return nil
		}
		idx, ok := asInt(ie[0])
		if !ok {
			return nil
		}
		detail, _ := ie[1].(map[string]interface{})
		code, isCustom := asInt(detail["Custom"])
		switch {
		case idx == transferIx && isCustom && code == customInsufficientFunds:
			return ErrInsufficientFunds
		case idx == transferIx && detail == nil && ie[1] == "InvalidAccountData":
			// The source has no token account for the mint.
			return ErrInsufficientFunds
		case idx == transferIx-1 && isCustom && code == customInsufficientFunds:
			// The ATA create could not pay the rent.
			return ErrFeePayerFunds
		}
	}
	return nil
}

func asInt(v interface{}) (int, bool) {
	switch n := v.(type) {
	case float64:
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		return int(n), true
	}
	return 0, false
}
