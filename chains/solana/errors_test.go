package solana

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClassifyTxError(t *testing.T) {
	parse := func(s string) interface{} {
		var v interface{}
		require.NoError(t, json.Unmarshal([]byte(s), &v))
		return v
	}
	require.ErrorIs(t, classifyTxError(parse(`{"InstructionError":[1,{"Custom":1}]}`), ixTransfer), ErrInsufficientFunds)
	require.ErrorIs(t, classifyTxError(parse(`{"InstructionError":[0,{"Custom":1}]}`), ixTransfer), ErrFeePayerFunds)
	require.ErrorIs(t, classifyTxError(parse(`"InsufficientFundsForFee"`), ixTransfer), ErrFeePayerFunds)
	require.ErrorIs(t, classifyTxError(parse(`{"InsufficientFundsForRent":{"account_index":0}}`), ixTransfer), ErrFeePayerFunds)
	require.Nil(t, classifyTxError(parse(`{"InstructionError":[1,{"Custom":4}]}`), ixTransfer))
	require.Nil(t, classifyTxError(parse(`"BlockhashNotFound"`), ixTransfer))
}

func TestValidateAddress(t *testing.T) {
	require.NoError(t, ValidateAddress("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"))
	require.NoError(t, ValidateAddress("11111111111111111111111111111111"))
	for _, bad := range []string{
		"",
		"0x36CbD53842c5426634e7929541eC2318f3dCF7e",
		"EPjFWdd5AufqSSqeM2qN1xzybapC8G4", // too short
		"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v ",
		"EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt0v", // 0 is not base58
	} {
		require.Error(t, ValidateAddress(bad), bad)
	}
}

func TestPrivateKey(t *testing.T) {
	_, err := privateKey(make([]byte, 32))
	require.Error(t, err)
	key := make([]byte, 64)
	_, err = privateKey(key) // seed zero does not have public key zero
	require.Error(t, err)
}
