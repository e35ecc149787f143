package solana_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	agentsolana "agentpay/chains/solana"
)

// The treasury pays the fee and the rent of the recipient's new token
// account; the agent needs no SOL. (What every adapter does:
// TestConformance.)
func TestLedgerTransfer(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := tc.ledger
	client := rpc.New(tc.dn.RPCURL)
	require.Equal(t, chains.Solana, l.Chain())
	require.Equal(t, tc.dn.Mint.String(), l.Token())

	// The agent holds USDC and no SOL at all; the recipient has never been
	// seen on chain.
	agent := newKey(t)
	recipient := newKey(t).PublicKey()
	_, err := tc.dn.Send(ctx, agent.PublicKey(), 5_000_000)
	require.NoError(t, err)
	requireBalance(t, l, agent.PublicKey(), 5_000_000)
	requireBalance(t, l, recipient, 0)
	agentLamports, err := client.GetBalance(ctx, agent.PublicKey(), rpc.CommitmentConfirmed)
	require.NoError(t, err)
	require.Zero(t, agentLamports.Value)
	treasuryBefore, err := client.GetBalance(ctx, tc.treasury.PublicKey(), rpc.CommitmentConfirmed)
	require.NoError(t, err)

	sub, err := l.Transfer(ctx, chains.TransferRequest{Key: agent, To: recipient.String(), Amount: big.NewInt(1_234_567)})
	require.NoError(t, err)
	require.Equal(t, agent.PublicKey().String(), sub.From)
	rcpt, err := l.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, rcpt.State, rcpt.Err)
	require.Positive(t, rcpt.Block)

	requireBalance(t, l, agent.PublicKey(), 5_000_000-1_234_567)
	requireBalance(t, l, recipient, 1_234_567)

	// The treasury paid the fee and the new account's rent; the agent still
	// has no lamports.
	agentLamports, err = client.GetBalance(ctx, agent.PublicKey(), rpc.CommitmentConfirmed)
	require.NoError(t, err)
	require.Zero(t, agentLamports.Value)
	treasuryAfter, err := client.GetBalance(ctx, tc.treasury.PublicKey(), rpc.CommitmentConfirmed)
	require.NoError(t, err)
	require.Less(t, treasuryAfter.Value, treasuryBefore.Value-2_000_000, "treasury pays rent (~0.002 SOL) and fee")

	// A second transfer to the now existing account: the idempotent create
	// must not fail.
	sub, err = l.Transfer(ctx, chains.TransferRequest{Key: agent, To: recipient.String(), Amount: big.NewInt(1)})
	require.NoError(t, err)
	rcpt, err = l.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, rcpt.State, rcpt.Err)
	requireBalance(t, l, recipient, 1_234_568)

	// With a priority fee the compute-budget instructions ride along.
	withFee, err := agentsolana.New(ctx, agentsolana.Config{
		RPCURL:      tc.dn.RPCURL,
		Mint:        tc.dn.Mint.String(),
		FeePayer:    tc.treasury,
		PriorityFee: 1_000,
	})
	require.NoError(t, err)
	sub, err = withFee.Transfer(ctx, chains.TransferRequest{Key: agent, To: recipient.String(), Amount: big.NewInt(2)})
	require.NoError(t, err)
	rcpt, err = withFee.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, rcpt.State, rcpt.Err)
	requireBalance(t, l, recipient, 1_234_570)
}

func TestNewChecksMint(t *testing.T) {
	tc := startChain(t)
	ctx := context.Background()
	_, err := agentsolana.New(ctx, agentsolana.Config{RPCURL: tc.dn.RPCURL, Mint: tc.dn.Mint.String(), Decimals: 9, FeePayer: tc.treasury})
	require.ErrorContains(t, err, "decimals")
	_, err = agentsolana.New(ctx, agentsolana.Config{RPCURL: tc.dn.RPCURL, Mint: newKey(t).PublicKey().String(), FeePayer: tc.treasury})
	require.ErrorContains(t, err, "does not exist")
	_, err = agentsolana.New(ctx, agentsolana.Config{RPCURL: tc.dn.RPCURL, Mint: tc.dn.Mint.String(), FeePayer: tc.treasury[:32]})
	require.Error(t, err)
}

// A transfer the node's preflight refuses says why, with the simulation's
// logs; a malformed key never reaches the node. (The refusals every adapter
// reports alike: TestConformance.)
func TestLedgerTransferRefused(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := tc.ledger
	to := newKey(t).PublicKey().String()

	// A key without any token account holds nothing.
	_, err := l.Transfer(ctx, chains.TransferRequest{Key: newKey(t), To: to, Amount: big.NewInt(1)})
	require.ErrorIs(t, err, agentsolana.ErrInsufficientFunds)
	var sendErr *agentsolana.SendError
	require.ErrorAs(t, err, &sendErr)
	require.NotEmpty(t, sendErr.Logs)

	agent := newKey(t)
	_, err = l.Transfer(ctx, chains.TransferRequest{Key: agent[:32], To: to, Amount: big.NewInt(1)})
	require.Error(t, err)

	// A signature the chain never saw.
	var unknown solana.Signature
	unknown[0] = 1
	r, err := l.Receipt(ctx, unknown.String())
	require.NoError(t, err)
	require.Equal(t, chains.TxUnknown, r.State)
}

func requireBalance(t *testing.T, l *agentsolana.Ledger, owner solana.PublicKey, want uint64) {
	t.Helper()
	got, err := l.Balance(context.Background(), owner.String())
	require.NoError(t, err)
	require.Equal(t, new(big.Int).SetUint64(want).String(), got.String())
}

func TestLedgerFeePayerWithoutSOL(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	broke, err := agentsolana.New(ctx, agentsolana.Config{RPCURL: tc.dn.RPCURL, Mint: tc.dn.Mint.String(), FeePayer: newKey(t)})
	require.NoError(t, err)
	agent := newKey(t)
	_, err = tc.dn.Send(ctx, agent.PublicKey(), 10)
	require.NoError(t, err)
	_, err = broke.Transfer(ctx, chains.TransferRequest{Key: agent, To: newKey(t).PublicKey().String(), Amount: big.NewInt(1)})
	require.ErrorIs(t, err, agentsolana.ErrFeePayerFunds)
	require.ErrorIs(t, err, chains.ErrRefused, "not broadcast")
	require.NotErrorIs(t, err, chains.ErrInsufficientFunds, "the sender is not short of USDC")
}

// A transaction that lands and fails (sent here without preflight, as a
// wallet may) is reported failed with the chain's error.
func TestLedgerReceiptFailed(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agent := newKey(t)
	_, err := tc.dn.Send(ctx, agent.PublicKey(), 10)
	require.NoError(t, err)
	src, _, err := solana.FindAssociatedTokenAddress(agent.PublicKey(), tc.dn.Mint)
	require.NoError(t, err)
	dst, _, err := solana.FindAssociatedTokenAddress(tc.dn.Payer.PublicKey(), tc.dn.Mint)
	require.NoError(t, err)
	ix, err := token.NewTransferCheckedInstruction(11, 6, src, tc.dn.Mint, dst, agent.PublicKey(), nil).ValidateAndBuild()
	require.NoError(t, err)
	client := rpc.New(tc.dn.RPCURL)
	bh, err := client.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	tx, err := solana.NewTransaction([]solana.Instruction{ix}, bh.Value.Blockhash, solana.TransactionPayer(tc.treasury.PublicKey()))
	require.NoError(t, err)
	_, err = tx.Sign(func(pk solana.PublicKey) *solana.PrivateKey {
		if pk.Equals(agent.PublicKey()) {
			return &agent
		}
		return &tc.treasury
	})
	require.NoError(t, err)
	sig, err := client.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{SkipPreflight: true})
	require.NoError(t, err)

	rcpt, err := tc.ledger.Wait(ctx, sig.String())
	require.NoError(t, err)
	require.Equal(t, chains.TxFailed, rcpt.State)
	require.Contains(t, rcpt.Err, "InstructionError")
	require.Positive(t, rcpt.Block)
	requireBalance(t, tc.ledger, agent.PublicKey(), 10)
}
