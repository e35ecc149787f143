package agentpay

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains/evm"
	"agentpay/chains/solana"
	"agentpay/internal/vault"
)

func TestTreasuryKeys(t *testing.T) {
	master, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	v1, err := vault.New(master)
	require.NoError(t, err)
	v2, err := vault.New(master)
	require.NoError(t, err)

	t1, err := DeriveTreasuryKeys(v1)
	require.NoError(t, err)
	t2, err := DeriveTreasuryKeys(v2)
	require.NoError(t, err)
	require.Equal(t, t1, t2, "the treasury is a function of the master key")

	addr, err := evm.AddressOf(t1.EVM)
	require.NoError(t, err)
	require.Equal(t, t1.EVMAddress, addr)
	addr, err = solana.AddressOf(t1.Solana)
	require.NoError(t, err)
	require.Equal(t, t1.SolanaAddress, addr)

	other, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	v3, err := vault.New(other)
	require.NoError(t, err)
	t3, err := DeriveTreasuryKeys(v3)
	require.NoError(t, err)
	require.NotEqual(t, t1.EVMAddress, t3.EVMAddress)

	seed := v1.DepositSeed()
	_, depositAddr, err := evm.DeriveKey(seed, 0)
	require.NoError(t, err)
	require.NotEqual(t, depositAddr, t1.EVMAddress, "treasury and deposit addresses come from separate seeds")

	b, err := json.Marshal(t1)
	require.NoError(t, err)
	for _, out := range []string{fmt.Sprint(t1), fmt.Sprintf("%v %+v %#v %s %x", t1, t1, t1, t1, t1), string(b)} {
		require.NotContains(t, out, hex.EncodeToString(t1.EVM))
		require.NotContains(t, out, hex.EncodeToString(t1.Solana))
		require.Contains(t, out, t1.EVMAddress)
	}
}
