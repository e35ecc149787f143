package evm

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

func TestWatchlist(t *testing.T) {
	a := common.HexToAddress("0x00000000000000000000000000000000000000Ab")
	wl := NewWatchlist([]string{a.Hex()})
	require.True(t, wl.Contains(normalized(a)))
	require.True(t, wl.Contains(a.Hex()))
	require.True(t, wl.Contains(NormalizeAddress(a.Hex())))
	require.False(t, wl.Contains(normalized(common.Address{1})))
	require.Equal(t, []string{"0x00000000000000000000000000000000000000ab"}, wl.Addresses())
}

func TestValidateAddress(t *testing.T) {
	good := "0x52908400098527886E0F7030069857D2E4169EE7" // EIP-55 test vector
	for _, s := range []string{good, "0x52908400098527886e0f7030069857d2e4169ee7", "0x52908400098527886E0F7030069857D2E4169EE7", "0xde709f2102306220921060314715629080e2fb77", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359", "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb"} {
		require.NoError(t, ValidateAddress(s), s)
	}
	for _, s := range []string{"", "0x", "52908400098527886E0F7030069857D2E4169EE7", "0x52908400098527886E0F7030069857D2E4169EE", "0x52908400098527886E0F7030069857D2E4169EE7a",
		"0x52908400098527886e0F7030069857D2E4169EE7", // bad checksum
		"0xZ2908400098527886E0F7030069857D2E4169EE7", "0x0000000000000000000000000000000000000000"} {
		require.ErrorIs(t, ValidateAddress(s), chains.ErrInvalidAddress, s)
	}
}
