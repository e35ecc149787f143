package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// The source holds USDC and no native coin: the gas wallet relays its
// EIP-3009 authorization. A ledger that never saw the relay is refused the
// same authorization by the token (and finds it), so the funds move once
// across restarts too. (Transfers on every EVM chain: TestConformance.)
func TestTransferRelaysAuthorization(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	// Over HTTP JSON-RPC, as against a public node.
	l := c.ledger(t, true)
	require.Equal(t, chains.Base, l.Chain())

	srcKey, src := c.fundedKey(t, 10_000_000)
	_, dst := newKey(t)
	native, err := c.Client().BalanceAt(ctx, src, nil)
	require.NoError(t, err)
	require.Zero(t, native.Sign(), "the source must hold no native coin")

	req := chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(1_234_567), Ref: randomRef(t)}
	sub, err := l.Transfer(ctx, req)
	require.NoError(t, err)
	r, err := l.Receipt(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxPending, r.State, "pooled until a block is made")
	r = c.include(t, l, sub.TxHash)
	require.Equal(t, chains.TxIncluded, r.State, r.Err)
	native, err = c.Client().BalanceAt(ctx, src, nil)
	require.NoError(t, err)
	require.Zero(t, native.Sign(), "the source paid no gas")

	fresh := c.ledger(t, false)
	_, err = fresh.Transfer(ctx, req)
	require.ErrorIs(t, err, ErrAuthorizationUsed)
	require.ErrorIs(t, err, chains.ErrAlreadyUsed)
	require.NotErrorIs(t, err, chains.ErrRefused)
	used, err := fresh.AuthorizationUsed(ctx, src.Hex(), req.Ref)
	require.NoError(t, err)
	require.True(t, used)
	found, ok, err := fresh.FindAuthorization(ctx, src.Hex(), req.Ref, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, sub.TxHash, found)
	_, ok, err = fresh.FindAuthorization(ctx, src.Hex(), randomRef(t), 0)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, big.NewInt(1_234_567), c.usdcBalance(t, l, dst))
}

func TestTransferRefusals(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	l := c.ledger(t, false)
	srcKey, _ := c.fundedKey(t, 100)
	_, dst := newKey(t)

	// Refusals of the chain: TestConformance. These are the ledger's own.
	_, err := l.Transfer(ctx, chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(101), Ref: randomRef(t)})
	require.ErrorIs(t, err, ErrInsufficientBalance)
	_, err = l.Transfer(ctx, chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(0), Ref: randomRef(t)})
	require.ErrorIs(t, err, ErrInvalidAmount)
	_, err = l.Transfer(ctx, chains.TransferRequest{Key: []byte{1, 2, 3}, To: dst.Hex(), Amount: big.NewInt(1), Ref: randomRef(t)})
	require.ErrorIs(t, err, ErrInvalidKey)

	readOnly := c.config(false)
	readOnly.GasKey = nil
	ro, err := New(ctx, readOnly)
	require.NoError(t, err)
	_, err = ro.Transfer(ctx, chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(1), Ref: randomRef(t)})
	require.ErrorIs(t, err, ErrNoGasKey)

	wrongChain := c.config(false)
	wrongChain.ChainID = 1
	_, err = New(ctx, wrongChain)
	require.ErrorContains(t, err, "chain id")

	noToken := c.config(false)
	noToken.USDC = dst.Hex()
	_, err = New(ctx, noToken)
	require.ErrorContains(t, err, "no contract")

	wrongDecimals := c.config(false)
	wrongDecimals.Decimals = 18
	_, err = New(ctx, wrongDecimals)
	require.ErrorContains(t, err, "decimals")
}

// Fifty transfers relayed at once by one gas wallet must all land, with no
// nonce used twice and none skipped.
func TestConcurrentTransfersOneGasWallet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startChain(t, chains.Base)
	l := c.ledger(t, false)

	const sources, perSource = 5, 10
	keys := make([][]byte, sources)
	addrs := make([]common.Address, sources)
	for i := range keys {
		keys[i], addrs[i] = newKey(t)
		_, err := c.Send(ctx, addrs[i], big.NewInt(1_000_000))
		require.NoError(t, err)
	}
	recipients := make([]common.Address, sources*perSource)
	for i := range recipients {
		_, recipients[i] = newKey(t)
	}

	// Blocks keep coming while the transfers are relayed, as on a live chain.
	stop := make(chan struct{})
	var miner sync.WaitGroup
	miner.Add(1)
	go func() {
		defer miner.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				c.Commit()
			}
		}
	}()

	subs := make([]chains.Submitted, len(recipients))
	errs := make([]error, len(recipients))
	var wg sync.WaitGroup
	for i := range recipients {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			subs[i], errs[i] = l.Transfer(ctx, chains.TransferRequest{
				Key: keys[i%sources], To: recipients[i].Hex(), Amount: big.NewInt(int64(1000 + i)), Ref: randomRef(t),
			})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "transfer %d", i)
	}
	for _, s := range subs {
		r, err := l.Wait(ctx, s.TxHash)
		require.NoError(t, err)
		require.Equal(t, chains.TxIncluded, r.State, r.Err)
	}
	close(stop)
	miner.Wait()

	spent := make([]int64, sources)
	for i, to := range recipients {
		require.Equal(t, big.NewInt(int64(1000+i)), c.usdcBalance(t, l, to))
		spent[i%sources] += int64(1000 + i)
	}
	for i, a := range addrs {
		require.Equal(t, big.NewInt(1_000_000-spent[i]), c.usdcBalance(t, l, a))
	}
	nonce, err := c.Client().NonceAt(ctx, crypto.PubkeyToAddress(c.gasKey.PublicKey), nil)
	require.NoError(t, err)
	require.Equal(t, uint64(len(recipients)), nonce, "one gas nonce per transfer")
}

// When something else spends the gas wallet's nonce, the ledger resyncs and
// the transfer still goes through.
func TestTransferResyncsNonce(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	l := c.ledger(t, false)
	srcKey, _ := c.fundedKey(t, 1_000)
	_, dst := newKey(t)

	transfer := func() {
		sub, err := l.Transfer(ctx, chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(1), Ref: randomRef(t)})
		require.NoError(t, err)
		r := c.include(t, l, sub.TxHash)
		require.Equal(t, chains.TxIncluded, r.State)
	}
	transfer() // the ledger now counts the gas wallet's nonces itself

	// Another process uses the wallet: one tx mined, one still pooled.
	gas := crypto.PubkeyToAddress(c.gasKey.PublicKey)
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(c.ChainID))
	for i := 0; i < 2; i++ {
		nonce, err := c.Client().PendingNonceAt(ctx, gas)
		require.NoError(t, err)
		tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{
			ChainID: new(big.Int).SetUint64(c.ChainID), Nonce: nonce, To: &gas, Gas: 21_000,
			GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(100e9),
		}), signer, c.gasKey)
		require.NoError(t, err)
		require.NoError(t, c.Client().SendTransaction(ctx, tx))
		for i == 0 {
			c.Commit()
			mined, err := c.Client().NonceAt(ctx, gas, nil)
			require.NoError(t, err)
			if mined > nonce {
				break
			}
		}
	}
	transfer()
	transfer()
	require.Equal(t, big.NewInt(3), c.usdcBalance(t, l, dst))
}

func TestReceiptStates(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	l := c.ledger(t, true)

	r, err := l.Receipt(ctx, common.Hash{1}.Hex())
	require.NoError(t, err)
	require.Equal(t, chains.TxUnknown, r.State)
	_, err = l.Receipt(ctx, "0x12")
	require.Error(t, err)

	// An authorization signed by the wrong key reverts on chain; the
	// receipt says failed, with the token's reason.
	_, src := newKey(t)
	otherKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	auth := authorization{From: src, To: src, Value: big.NewInt(1), ValidAfter: new(big.Int), ValidBefore: big.NewInt(time.Now().Add(time.Hour).Unix()), Nonce: randomRef(t)}
	data, err := auth.calldata(l.domain, otherKey)
	require.NoError(t, err)
	head, err := l.client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	fees, err := l.fees(ctx, head)
	require.NoError(t, err)
	tx, err := l.nonces.send(ctx, func(nonce uint64) (*types.Transaction, error) {
		return types.SignTx(fees.tx(l.chainID, nonce, l.token.address, 200_000, data), l.signer, l.gasKey)
	})
	require.NoError(t, err)
	r = c.include(t, l, tx.Hash().Hex())
	require.Equal(t, chains.TxFailed, r.State)
	require.Contains(t, r.Err, "invalid signature")

	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = l.Wait(waitCtx, common.Hash{2}.Hex())
	require.True(t, errors.Is(err, context.DeadlineExceeded), fmt.Sprint(err))
}

// A chain whose clock runs hours ahead of this machine's (the token checks
// validBefore against block time) still takes transfers: the authorization
// is dated from the later of the two clocks.
func TestTransferOnAChainAheadOfOurClock(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	l := c.ledger(t, false)
	srcKey, _ := c.fundedKey(t, 5_000_000)
	_, dst := newKey(t)
	require.NoError(t, c.AdjustTime(3*time.Hour))
	head, err := c.Client().HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	require.Greater(t, int64(head.Time), time.Now().Add(2*time.Hour).Unix(), "the chain is ahead")

	sub, err := l.Transfer(ctx, chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(1_000_000), Ref: randomRef(t)})
	require.NoError(t, err)
	r := c.include(t, l, sub.TxHash)
	require.Equal(t, chains.TxIncluded, r.State, r.Err)
	require.Equal(t, big.NewInt(1_000_000), c.usdcBalance(t, l, dst))
}

func TestValidBefore(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name     string
		headTime uint64
		want     int64
	}{
		{"chain behind our clock", 999_000, 1_003_600},
		{"chain on time", 1_000_000, 1_003_600},
		{"chain ahead", 1_010_000, 1_013_600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, validBefore(now, tc.headTime, time.Hour))
		})
	}
}

// The domain computed from name() and version() (the fallback for tokens
// without DOMAIN_SEPARATOR()) equals the one the token reports.
func TestDomainSeparatorFallback(t *testing.T) {
	c := startChain(t, chains.Ethereum)
	l := c.ledger(t, false)
	require.Equal(t, l.domain, eip712Domain("USD Coin", "2", new(big.Int).SetUint64(c.ChainID), c.USDC))
}
