package evm

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"agentpay/chains"
)

// Errors of the ledger. Messages never carry key material. Those the
// service acts on are marked with the chains sentinel they mean.
var (
	// ErrNoGasKey: the ledger was built without a relayer key.
	ErrNoGasKey = errors.New("evm: no gas key configured")
	// ErrAuthorizationUsed: the transfer's Ref (its EIP-3009 nonce) was
	// already used or cancelled on chain, so relaying it again would move
	// nothing; the funds moved (or were voided) in an earlier transaction.
	ErrAuthorizationUsed = chains.Mark(errors.New("evm: authorization already used"), chains.ErrAlreadyUsed)
	// ErrInsufficientBalance: the source holds less USDC than the amount.
	ErrInsufficientBalance = chains.Mark(errors.New("evm: insufficient USDC balance"), chains.ErrInsufficientFunds)
	// ErrInvalidAmount: the amount is missing, zero or negative.
	ErrInvalidAmount = chains.Mark(errors.New("evm: amount must be positive"), chains.ErrRefused)
)

// customErrors names the custom errors of common token implementations
// (OpenZeppelin 5's ERC-20), which abi.UnpackRevert does not decode.
var customErrors = func() map[string]string {
	m := map[string]string{}
	for _, sig := range []string{
		"ERC20InsufficientBalance(address,uint256,uint256)",
		"ERC20InvalidSender(address)",
		"ERC20InvalidReceiver(address)",
		"ERC20InsufficientAllowance(address,uint256,uint256)",
		"OwnableUnauthorizedAccount(address)",
	} {
		m[string(crypto.Keccak256([]byte(sig))[:4])] = sig[:strings.IndexByte(sig, '(')]
	}
	return m
}()

// revertReason extracts a readable reason from an RPC error carrying revert
// data, or returns "" when there is none.
func revertReason(err error) string {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return ""
	}
	s, ok := de.ErrorData().(string)
	if !ok {
		return ""
	}
	data, decErr := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if decErr != nil || len(data) < 4 {
		return ""
	}
	if reason, err := abi.UnpackRevert(data); err == nil {
		return reason
	}
	if name, ok := customErrors[string(data[:4])]; ok {
		return name
	}
	return fmt.Sprintf("custom error 0x%x", data[:4])
}

// classifyRevert maps a failed call or estimate to the adapter's sentinel
// errors where the revert says which, keeping the reason in the message. A
// revert with a reason is a refusal (nothing was sent); an estimate that
// failed without one (the node unreachable...) is not.
func classifyRevert(err error) error {
	reason := revertReason(err)
	text := strings.ToLower(reason + " " + err.Error())
	switch {
	case strings.Contains(text, "authorization is used"):
		return fmt.Errorf("%w: %s", ErrAuthorizationUsed, reason)
	case strings.Contains(text, "exceeds balance"), strings.Contains(text, "erc20insufficientbalance"):
		return fmt.Errorf("%w: %s", ErrInsufficientBalance, reason)
	case reason != "":
		return chains.Mark(fmt.Errorf("evm: transfer would revert: %s", reason), chains.ErrRefused)
	}
	return fmt.Errorf("evm: estimating transfer gas: %w", err)
}
