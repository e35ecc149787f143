package treasury

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/internal/vault"
)

func TestDerive(t *testing.T) {
	master, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	v1, err := vault.New(master)
	require.NoError(t, err)
	v2, err := vault.New(master)
	require.NoError(t, err)

	families := adapters.Families()
	t1, err := Derive(v1, families)
	require.NoError(t, err)
	t2, err := Derive(v2, families)
	require.NoError(t, err)
	require.Equal(t, t1, t2, "the treasury is a function of the master key")

	evmWallets, solWallets := families[chains.FamilyEVM], families[chains.FamilySolana]
	addr, err := evmWallets.AddressOf(t1.EVM)
	require.NoError(t, err)
	require.Equal(t, t1.EVMAddress, addr)
	addr, err = solWallets.AddressOf(t1.Solana)
	require.NoError(t, err)
	require.Equal(t, t1.SolanaAddress, addr)

	other, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	v3, err := vault.New(other)
	require.NoError(t, err)
	t3, err := Derive(v3, families)
	require.NoError(t, err)
	require.NotEqual(t, t1.EVMAddress, t3.EVMAddress)

	seed := v1.DepositSeed()
	_, depositAddr, err := evmWallets.DeriveKey(seed, 0)
	require.NoError(t, err)
	require.NotEqual(t, depositAddr, t1.EVMAddress, "treasury and deposit addresses come from separate seeds")

	_, err = Derive(v1, chains.Families{chains.FamilyEVM: evmWallets})
	require.ErrorContains(t, err, "no solana family")

	b, err := json.Marshal(t1)
	require.NoError(t, err)
	for _, out := range []string{fmt.Sprint(t1), fmt.Sprintf("%v %+v %#v %s %x", t1, t1, t1, t1, t1), string(b)} {
		require.NotContains(t, out, hex.EncodeToString(t1.EVM))
		require.NotContains(t, out, hex.EncodeToString(t1.Solana))
		require.Contains(t, out, t1.EVMAddress)
	}
}
