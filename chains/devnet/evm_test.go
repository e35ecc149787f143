package devnet_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/chains/devnet/usdc"
)

func startEVM(t *testing.T, cfg devnet.EVMConfig) *devnet.EVM {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	e, err := devnet.StartEVM(ctx, cfg)
	require.NoError(t, err)
	t.Logf("%s devnet (chain id %d) started in %s at %s", e.Chain, e.ChainID, time.Since(begin), e.RPCURL)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newKey(t *testing.T) (*ecdsa.PrivateKey, common.Address) {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	return key, crypto.PubkeyToAddress(key.PublicKey)
}

func tokenOf(t *testing.T, e *devnet.EVM) *usdc.USDC {
	t.Helper()
	token, err := usdc.NewUSDC(e.USDC, e.Client())
	require.NoError(t, err)
	return token
}

func balanceOf(t *testing.T, e *devnet.EVM, addr common.Address) *big.Int {
	t.Helper()
	bal, err := tokenOf(t, e).BalanceOf(&bind.CallOpts{}, addr)
	require.NoError(t, err)
	return bal
}

// domainSeparator is EIP-712's formula computed independently of the
// contract, with USDC's domain: name "USD Coin", version "2".
func domainSeparator(chainID uint64, verifyingContract common.Address) common.Hash {
	return crypto.Keccak256Hash(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte("USD Coin")),
		crypto.Keccak256([]byte("2")),
		math.U256Bytes(new(big.Int).SetUint64(chainID)),
		common.LeftPadBytes(verifyingContract.Bytes(), 32),
	)
}

type authorization struct {
	From, To                       common.Address
	Value, ValidAfter, ValidBefore *big.Int
	Nonce                          [32]byte
	V                              uint8
	R, S                           [32]byte
}

// signTransferAuthorization signs an EIP-3009 TransferWithAuthorization the
// way a wallet does, from the type string, not from the contract.
func signTransferAuthorization(t *testing.T, key *ecdsa.PrivateKey, domain common.Hash, to common.Address, value *big.Int, validBefore time.Time) authorization {
	t.Helper()
	return signAuthorization(t, "TransferWithAuthorization", key, domain, to, value, validBefore)
}

// signAuthorization signs TransferWithAuthorization or ReceiveWithAuthorization
// (same fields, different primary type) with a random nonce.
func signAuthorization(t *testing.T, primaryType string, key *ecdsa.PrivateKey, domain common.Hash, to common.Address, value *big.Int, validBefore time.Time) authorization {
	t.Helper()
	a := authorization{
		From:        crypto.PubkeyToAddress(key.PublicKey),
		To:          to,
		Value:       value,
		ValidAfter:  big.NewInt(0),
		ValidBefore: big.NewInt(validBefore.Unix()),
	}
	_, err := rand.Read(a.Nonce[:])
	require.NoError(t, err)

	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte(primaryType+"(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(a.From.Bytes(), 32),
		common.LeftPadBytes(a.To.Bytes(), 32),
		math.U256Bytes(new(big.Int).Set(a.Value)),
		math.U256Bytes(new(big.Int).Set(a.ValidAfter)),
		math.U256Bytes(new(big.Int).Set(a.ValidBefore)),
		a.Nonce[:],
	)
	a.V, a.R, a.S = signTyped(t, key, domain, structHash)
	return a
}

// signTyped signs an EIP-712 struct hash under a domain, returning v in {27, 28}.
func signTyped(t *testing.T, key *ecdsa.PrivateKey, domain common.Hash, structHash []byte) (v uint8, r, s [32]byte) {
	t.Helper()
	digest := crypto.Keccak256([]byte{0x19, 0x01}, domain.Bytes(), structHash)
	sig, err := crypto.Sign(digest, key)
	require.NoError(t, err)
	copy(r[:], sig[:32])
	copy(s[:], sig[32:64])
	return sig[64] + 27, r, s
}

func TestStartEVMServesRPC(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Base})

	require.Equal(t, uint64(84532), e.ChainID)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, e.RPCURL)
	require.NotEqual(t, "http://127.0.0.1:0", e.RPCURL)

	for _, url := range []string{e.RPCURL, e.WSURL} {
		client, err := ethclient.Dial(url)
		require.NoError(t, err, url)
		chainID, err := client.ChainID(ctx)
		require.NoError(t, err, url)
		require.Equal(t, uint64(84532), chainID.Uint64(), url)

		// The token is reachable over the wire, not only in process.
		code, err := client.CodeAt(ctx, e.USDC, nil)
		require.NoError(t, err, url)
		require.NotEmpty(t, code, url)
		client.Close()
	}

	var netVersion string
	client, err := ethclient.Dial(e.RPCURL)
	require.NoError(t, err)
	defer client.Close()
	require.NoError(t, client.Client().CallContext(ctx, &netVersion, "net_version"))
	require.Equal(t, "84532", netVersion)

	// eth_getLogs is served too (the EVM adapter scans Transfer logs with it).
	logs, err := client.FilterLogs(ctx, ethereum.FilterQuery{Addresses: []common.Address{e.USDC}, FromBlock: big.NewInt(0)})
	require.NoError(t, err)
	require.NotEmpty(t, logs, "the mint to the payer")
}

func TestStartEVMChainIDOverride(t *testing.T) {
	t.Parallel()
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Polygon, ChainID: 31337})
	chainID, err := e.Client().ChainID(testContext(t))
	require.NoError(t, err)
	require.Equal(t, uint64(31337), chainID.Uint64())
}

func TestStartEVMRefusesNonEVM(t *testing.T) {
	t.Parallel()
	_, err := devnet.StartEVM(context.Background(), devnet.EVMConfig{Chain: chains.Solana})
	require.Error(t, err)
}

func TestTokenMetadata(t *testing.T) {
	t.Parallel()
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Arbitrum})
	token := tokenOf(t, e)
	opts := &bind.CallOpts{}

	name, err := token.Name(opts)
	require.NoError(t, err)
	require.Equal(t, "USD Coin", name)
	symbol, err := token.Symbol(opts)
	require.NoError(t, err)
	require.Equal(t, "USDC", symbol)
	decimals, err := token.Decimals(opts)
	require.NoError(t, err)
	require.Equal(t, uint8(6), decimals)
	version, err := token.Version(opts)
	require.NoError(t, err)
	require.Equal(t, "2", version)

	sep, err := token.DOMAINSEPARATOR(opts)
	require.NoError(t, err)
	require.Equal(t, domainSeparator(421614, e.USDC), common.Hash(sep))

	typehash, err := token.TRANSFERWITHAUTHORIZATIONTYPEHASH(opts)
	require.NoError(t, err)
	require.Equal(t, crypto.Keccak256Hash([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")), common.Hash(typehash))

	payer := crypto.PubkeyToAddress(e.Payer.PublicKey)
	owner, err := token.Owner(opts)
	require.NoError(t, err)
	require.Equal(t, payer, owner)
	require.Equal(t, devnet.PayerUSDC, balanceOf(t, e, payer))
	supply, err := token.TotalSupply(opts)
	require.NoError(t, err)
	require.Equal(t, devnet.PayerUSDC, supply)
}

func TestTokenAddressStableAcrossStarts(t *testing.T) {
	t.Parallel()
	a := startEVM(t, devnet.EVMConfig{Chain: chains.Ethereum})
	b := startEVM(t, devnet.EVMConfig{Chain: chains.Ethereum})
	require.Equal(t, a.USDC, b.USDC)
	require.NotEqual(t, a.RPCURL, b.RPCURL)
}

func TestSendAndMint(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Base})
	payer := crypto.PubkeyToAddress(e.Payer.PublicKey)
	_, to := newKey(t)

	amount := big.NewInt(25_123_456) // 25.123456 USDC
	hash, err := e.Send(ctx, to, amount)
	require.NoError(t, err)

	// Included when Send returns, with no ticker running.
	receipt, err := e.Client().TransactionReceipt(ctx, hash)
	require.NoError(t, err)
	require.Equal(t, types.ReceiptStatusSuccessful, receipt.Status)
	require.Equal(t, amount, balanceOf(t, e, to))
	require.Equal(t, new(big.Int).Sub(devnet.PayerUSDC, amount), balanceOf(t, e, payer))

	transfer, err := tokenOf(t, e).ParseTransfer(*receipt.Logs[0])
	require.NoError(t, err)
	require.Equal(t, payer, transfer.From)
	require.Equal(t, to, transfer.To)
	require.Equal(t, amount, transfer.Value)

	_, err = e.Mint(ctx, to, big.NewInt(1))
	require.NoError(t, err)
	require.Equal(t, big.NewInt(25_123_457), balanceOf(t, e, to))

	// A zero-value transfer goes through (anyone can send one); a negative
	// amount does not.
	_, err = e.Send(ctx, to, big.NewInt(0))
	require.NoError(t, err)
	require.Equal(t, big.NewInt(25_123_457), balanceOf(t, e, to))
	_, err = e.Send(ctx, to, big.NewInt(-1))
	require.Error(t, err)
	_, err = e.Send(ctx, to, new(big.Int).Add(devnet.PayerUSDC, big.NewInt(1)))
	require.Error(t, err, "more than the payer holds")
}

func TestSendConcurrent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Base, BlockTime: 50 * time.Millisecond})

	// Concurrent faucet calls must not collide on the payer's nonce.
	const n = 8
	addrs := make([]common.Address, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		_, addrs[i] = newKey(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Send(ctx, addrs[i], big.NewInt(int64(1_000_000+i)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for i, a := range addrs {
		require.Equal(t, big.NewInt(int64(1_000_000+i)), balanceOf(t, e, a))
	}
}

func TestTransferWithAuthorization(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	gasKey, gasAddr := newKey(t)
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Base, Fund: []common.Address{gasAddr}})
	client := e.Client()
	token := tokenOf(t, e)

	fromKey, from := newKey(t)
	_, to := newKey(t)
	_, err := e.Send(ctx, from, big.NewInt(10_000_000))
	require.NoError(t, err)

	native, err := client.BalanceAt(ctx, gasAddr, nil)
	require.NoError(t, err)
	require.Equal(t, devnet.NativeFunding, native)
	native, err = client.BalanceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Zero(t, native.Sign(), "the source holds no native coin")

	auth := signTransferAuthorization(t, fromKey, domainSeparator(e.ChainID, e.USDC), to, big.NewInt(4_990_000), time.Now().Add(time.Hour))
	relay := func(gasLimit uint64) (*types.Transaction, error) {
		opts, err := bind.NewKeyedTransactorWithChainID(gasKey, new(big.Int).SetUint64(e.ChainID))
		require.NoError(t, err)
		opts.Context = ctx
		opts.GasLimit = gasLimit // 0: estimate
		return token.TransferWithAuthorization(opts, auth.From, auth.To, auth.Value, auth.ValidAfter, auth.ValidBefore, auth.Nonce, auth.V, auth.R, auth.S)
	}
	mined := func(tx *types.Transaction) *types.Receipt {
		e.Commit()
		receipt, err := bind.WaitMined(ctx, client, tx)
		require.NoError(t, err)
		return receipt
	}

	tx, err := relay(0)
	require.NoError(t, err)
	receipt := mined(tx)
	require.Equal(t, types.ReceiptStatusSuccessful, receipt.Status)
	require.Equal(t, big.NewInt(5_010_000), balanceOf(t, e, from))
	require.Equal(t, big.NewInt(4_990_000), balanceOf(t, e, to))

	var sawUsed bool
	for _, l := range receipt.Logs {
		if used, err := token.ParseAuthorizationUsed(*l); err == nil {
			require.Equal(t, from, used.Authorizer)
			require.Equal(t, auth.Nonce, used.Nonce)
			sawUsed = true
		}
	}
	require.True(t, sawUsed, "AuthorizationUsed event")
	state, err := token.AuthorizationState(&bind.CallOpts{}, from, auth.Nonce)
	require.NoError(t, err)
	require.True(t, state)

	// A replay of the same nonce is refused at estimation, with FiatToken's reason...
	_, err = relay(0)
	require.ErrorContains(t, err, "FiatTokenV2: authorization is used or canceled")
	// ...and reverts on chain when forced through.
	tx, err = relay(200_000)
	require.NoError(t, err)
	require.Equal(t, types.ReceiptStatusFailed, mined(tx).Status)
	require.Equal(t, big.NewInt(5_010_000), balanceOf(t, e, from))
	require.Equal(t, big.NewInt(4_990_000), balanceOf(t, e, to))

	// A signature by anyone but `from` is refused.
	otherKey, _ := newKey(t)
	auth = signTransferAuthorization(t, otherKey, domainSeparator(e.ChainID, e.USDC), to, big.NewInt(1), time.Now().Add(time.Hour))
	auth.From = from
	_, err = relay(0)
	require.ErrorContains(t, err, "FiatTokenV2: invalid signature")

	// An expired authorization is refused.
	auth = signTransferAuthorization(t, fromKey, domainSeparator(e.ChainID, e.USDC), to, big.NewInt(1), time.Now().Add(-time.Minute))
	_, err = relay(0)
	require.ErrorContains(t, err, "FiatTokenV2: authorization is expired")

	// A signature for another chain id is refused (no cross-chain replay).
	auth = signTransferAuthorization(t, fromKey, domainSeparator(1, e.USDC), to, big.NewInt(1), time.Now().Add(time.Hour))
	_, err = relay(0)
	require.ErrorContains(t, err, "FiatTokenV2: invalid signature")
}

func TestCancelAndReceiveWithAuthorization(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	payeeKey, payee := newKey(t)
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Polygon, Fund: []common.Address{payee}})
	token := tokenOf(t, e)
	domain := domainSeparator(e.ChainID, e.USDC)

	fromKey, from := newKey(t)
	_, err := e.Send(ctx, from, big.NewInt(3_000_000))
	require.NoError(t, err)

	payeeOpts, err := bind.NewKeyedTransactorWithChainID(payeeKey, new(big.Int).SetUint64(e.ChainID))
	require.NoError(t, err)
	payeeOpts.Context = ctx
	mine := func(tx *types.Transaction, err error) *types.Receipt {
		t.Helper()
		require.NoError(t, err)
		e.Commit()
		receipt, err := bind.WaitMined(ctx, e.Client(), tx)
		require.NoError(t, err)
		return receipt
	}

	// receiveWithAuthorization: only the payee may submit it.
	auth := signAuthorization(t, "ReceiveWithAuthorization", fromKey, domain, payee, big.NewInt(1_000_000), time.Now().Add(time.Hour))
	receipt := mine(token.ReceiveWithAuthorization(payeeOpts, auth.From, auth.To, auth.Value, auth.ValidAfter, auth.ValidBefore, auth.Nonce, auth.V, auth.R, auth.S))
	require.Equal(t, types.ReceiptStatusSuccessful, receipt.Status)
	require.Equal(t, big.NewInt(1_000_000), balanceOf(t, e, payee))

	payerOpts, err := bind.NewKeyedTransactorWithChainID(e.Payer, new(big.Int).SetUint64(e.ChainID))
	require.NoError(t, err)
	payerOpts.Context = ctx
	auth = signAuthorization(t, "ReceiveWithAuthorization", fromKey, domain, payee, big.NewInt(1), time.Now().Add(time.Hour))
	_, err = token.ReceiveWithAuthorization(payerOpts, auth.From, auth.To, auth.Value, auth.ValidAfter, auth.ValidBefore, auth.Nonce, auth.V, auth.R, auth.S)
	require.ErrorContains(t, err, "FiatTokenV2: caller must be the payee")

	// cancelAuthorization voids an unused transfer authorization; anyone may relay the cancellation.
	transfer := signTransferAuthorization(t, fromKey, domain, payee, big.NewInt(1_000_000), time.Now().Add(time.Hour))
	cancelHash := crypto.Keccak256(
		crypto.Keccak256([]byte("CancelAuthorization(address authorizer,bytes32 nonce)")),
		common.LeftPadBytes(from.Bytes(), 32),
		transfer.Nonce[:],
	)
	v, r, s := signTyped(t, fromKey, domain, cancelHash)
	receipt = mine(token.CancelAuthorization(payeeOpts, from, transfer.Nonce, v, r, s))
	require.Equal(t, types.ReceiptStatusSuccessful, receipt.Status)
	canceled, err := token.ParseAuthorizationCanceled(*receipt.Logs[0])
	require.NoError(t, err)
	require.Equal(t, from, canceled.Authorizer)
	require.Equal(t, transfer.Nonce, canceled.Nonce)

	_, err = token.TransferWithAuthorization(payeeOpts, transfer.From, transfer.To, transfer.Value, transfer.ValidAfter, transfer.ValidBefore, transfer.Nonce, transfer.V, transfer.R, transfer.S)
	require.ErrorContains(t, err, "FiatTokenV2: authorization is used or canceled")
	require.Equal(t, big.NewInt(2_000_000), balanceOf(t, e, from))

	// Only the owner mints.
	_, err = token.Mint(payeeOpts, payee, big.NewInt(1))
	require.Error(t, err)
}

func TestBlocksAdvanceWithBlockTime(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Base, BlockTime: 50 * time.Millisecond})
	client := e.Client()

	start, err := client.BlockNumber(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := client.BlockNumber(ctx)
		return err == nil && n >= start+3
	}, 5*time.Second, 10*time.Millisecond)

	head, err := client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	prev := uint64(0)
	for n := uint64(1); n <= head.Number.Uint64(); n++ {
		h, err := client.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
		require.NoError(t, err)
		require.Greater(t, h.Time, prev, "timestamps strictly increase")
		prev = h.Time
	}
	// Dated from wall time, each block at least a second after its parent
	// (so a fast devnet runs ahead, by at most a second a block).
	now := time.Now().Unix()
	require.GreaterOrEqual(t, int64(head.Time), now-10)
	require.LessOrEqual(t, int64(head.Time), now+head.Number.Int64())

	// Send waits for the ticker's block; Commit alongside it is safe.
	_, to := newKey(t)
	e.Commit()
	_, err = e.Send(ctx, to, big.NewInt(7))
	require.NoError(t, err)
	require.Equal(t, big.NewInt(7), balanceOf(t, e, to))
}

func TestForkDropsBlock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	e := startEVM(t, devnet.EVMConfig{Chain: chains.Ethereum})
	client := e.Client()
	_, to := newKey(t)

	hash, err := e.Send(ctx, to, big.NewInt(1_000))
	require.NoError(t, err)
	receipt, err := client.TransactionReceipt(ctx, hash)
	require.NoError(t, err)
	block, err := client.HeaderByHash(ctx, receipt.BlockHash)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(1_000), balanceOf(t, e, to))

	require.NoError(t, e.Fork(block.ParentHash))

	// The block carrying the transfer is no longer canonical: the head is
	// its parent, the transaction has no receipt, the balance is gone.
	head, err := client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, block.ParentHash, head.Hash())
	_, err = client.TransactionReceipt(ctx, hash)
	require.True(t, errors.Is(err, ethereum.NotFound), "receipt after fork: %v", err)
	require.Zero(t, balanceOf(t, e, to).Sign())

	// The new chain grows past the old height with a different block there,
	// as after a real reorg; the dropped transaction may be re-included.
	e.Commit()
	e.Commit()
	replaced, err := client.HeaderByNumber(ctx, block.Number)
	require.NoError(t, err)
	require.NotEqual(t, block.Hash(), replaced.Hash())
	if r, err := client.TransactionReceipt(ctx, hash); err == nil {
		require.NotEqual(t, receipt.BlockHash, r.BlockHash)
		t.Logf("dropped transaction re-included in block %d", r.BlockNumber)
	}
}

func TestFourDevnetsSideBySide(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)

	nets := make([]*devnet.EVM, len(chains.EVMChains))
	var wg sync.WaitGroup
	begin := time.Now()
	for i, c := range chains.EVMChains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := devnet.StartEVM(ctx, devnet.EVMConfig{Chain: c, BlockTime: 100 * time.Millisecond})
			if err == nil {
				t.Cleanup(func() { _ = e.Close() })
			}
			nets[i] = e
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	t.Logf("four devnets started in %s", time.Since(begin))

	_, to := newKey(t)
	seen := map[uint64]bool{}
	for i, e := range nets {
		require.NotNil(t, e)
		require.Equal(t, chains.EVMChains[i], e.Chain)
		require.Equal(t, devnet.DefaultChainIDs[e.Chain], e.ChainID)

		client, err := ethclient.Dial(e.RPCURL)
		require.NoError(t, err)
		chainID, err := client.ChainID(ctx)
		client.Close()
		require.NoError(t, err)
		require.Equal(t, e.ChainID, chainID.Uint64())
		seen[e.ChainID] = true

		amount := big.NewInt(int64(i + 1))
		_, err = e.Send(ctx, to, amount)
		require.NoError(t, err)
		require.Equal(t, amount, balanceOf(t, e, to), "each chain keeps its own state")
	}
	require.Len(t, seen, 4)
}

func TestClose(t *testing.T) {
	t.Parallel()
	e, err := devnet.StartEVM(context.Background(), devnet.EVMConfig{Chain: chains.Base, BlockTime: 10 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.NoError(t, e.Close(), "idempotent")
	_, err = e.Send(context.Background(), common.Address{1}, big.NewInt(1))
	require.ErrorIs(t, err, devnet.ErrClosed)
	require.ErrorIs(t, e.Fork(common.Hash{}), devnet.ErrClosed)
}
