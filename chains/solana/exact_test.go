package solana_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math/big"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	agentsolana "agentpay/chains/solana"
)

// exactParts are the parts of an exact transaction a case changes; the
// defaults are what @x402/svm's client builds.
type exactParts struct {
	feePayer, authority solana.PublicKey
	signer              solana.PrivateKey // signs as the authority
	source, mint, dest  solana.PublicKey
	amount              uint64
	decimals            uint8
	limit               uint32
	price               uint64
	memo                []byte
	blockhash           solana.Hash
	// edit changes the instructions before the message is compiled.
	edit func([]solana.Instruction) []solana.Instruction
	// unsigned leaves the payer's signature out.
	unsigned bool
}

func computeLimit(units uint32) solana.Instruction {
	d := []byte{2, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(d[1:], units)
	return solana.NewInstruction(solana.ComputeBudget, nil, d)
}

func computePrice(micro uint64) solana.Instruction {
	d := make([]byte, 9)
	d[0] = 3
	binary.LittleEndian.PutUint64(d[1:], micro)
	return solana.NewInstruction(solana.ComputeBudget, nil, d)
}

func transferChecked(source, mint, dest, authority solana.PublicKey, amount uint64, decimals uint8) solana.Instruction {
	d := make([]byte, 10)
	d[0] = 12
	binary.LittleEndian.PutUint64(d[1:9], amount)
	d[9] = decimals
	return solana.NewInstruction(solana.TokenProgramID, solana.AccountMetaSlice{
		solana.Meta(source).WRITE(), solana.Meta(mint), solana.Meta(dest).WRITE(), solana.Meta(authority).SIGNER(),
	}, d)
}

func memoIx(data []byte) solana.Instruction {
	return solana.NewInstruction(agentsolana.MemoProgramID, nil, data)
}

// build makes the transaction the parts describe, signed by the payer
// only, its fee payer's slot left empty, as base64.
func (p exactParts) build(t testing.TB) string {
	t.Helper()
	ixs := []solana.Instruction{
		computeLimit(p.limit), computePrice(p.price),
		transferChecked(p.source, p.mint, p.dest, p.authority, p.amount, p.decimals),
	}
	if p.memo != nil {
		ixs = append(ixs, memoIx(p.memo))
	}
	if p.edit != nil {
		ixs = p.edit(ixs)
	}
	tx, err := solana.NewTransaction(ixs, p.blockhash, solana.TransactionPayer(p.feePayer))
	require.NoError(t, err)
	msg, err := tx.Message.MarshalBinary()
	require.NoError(t, err)
	tx.Signatures = make([]solana.Signature, tx.Message.Header.NumRequiredSignatures)
	for i := range tx.Signatures {
		if k := tx.Message.AccountKeys[i]; !p.unsigned && k.Equals(p.signer.PublicKey()) {
			sig, err := p.signer.Sign(msg)
			require.NoError(t, err)
			tx.Signatures[i] = sig
		}
	}
	raw, err := tx.MarshalBinary()
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(raw)
}

func ata(t testing.TB, owner, mint solana.PublicKey) solana.PublicKey {
	t.Helper()
	a, _, err := solana.FindAssociatedTokenAddress(owner, mint)
	require.NoError(t, err)
	return a
}

// exactCase is a payment of 1.5 USDC from payer to payTo with treasury
// paying the fee, and its requirements.
func exactCase(t testing.TB, treasury, payer solana.PrivateKey, payTo, mint solana.PublicKey, blockhash solana.Hash) (exactParts, agentsolana.ExactRequirements) {
	return exactParts{
			feePayer: treasury.PublicKey(), authority: payer.PublicKey(), signer: payer,
			source: ata(t, payer.PublicKey(), mint), mint: mint, dest: ata(t, payTo, mint),
			amount: 1_500_000, decimals: 6, limit: 20_000, price: 1, memo: []byte("cs_test_memo"), blockhash: blockhash,
		}, agentsolana.ExactRequirements{
			FeePayer: treasury.PublicKey(), PayTo: payTo, Mint: mint, Decimals: 6, Amount: 1_500_000,
		}
}

// TestExactRefusals: every transaction that strays from the exact layout,
// or from what is asked, is refused with x402's reason before the
// treasury signs anything; the one that keeps to it passes.
func TestExactRefusals(t *testing.T) {
	treasury, payer := newKey(t), newKey(t)
	payTo, mint, stranger := newKey(t).PublicKey(), newKey(t).PublicKey(), newKey(t)
	good, req := exactCase(t, treasury, payer, payTo, mint, solana.Hash{7})

	p, err := agentsolana.DecodeExact(good.build(t))
	require.NoError(t, err)
	require.NoError(t, p.Verify(req))
	require.Equal(t, payer.PublicKey(), p.Payer)
	require.Equal(t, uint64(1_500_000), p.Amount)
	require.Equal(t, [][]byte{[]byte("cs_test_memo")}, p.Memos)
	withMemo := req
	withMemo.Memo = "cs_test_memo"
	require.NoError(t, p.Verify(withMemo))
	require.Equal(t, good.build(t), p.Transaction())

	insert := func(at int, ix solana.Instruction) func([]solana.Instruction) []solana.Instruction {
		return func(ixs []solana.Instruction) []solana.Instruction {
			return append(ixs[:at:at], append([]solana.Instruction{ix}, ixs[at:]...)...)
		}
	}
	treasuryATA := ata(t, treasury.PublicKey(), mint)
	for _, tc := range []struct {
		name   string
		change func(*exactParts)
		req    func(*agentsolana.ExactRequirements)
		reason string
	}{
		{"fee payer as transfer authority", func(p *exactParts) {
			p.authority, p.signer, p.source = treasury.PublicKey(), treasury, treasuryATA
		}, nil, agentsolana.ExactExcessiveSigners},
		{"fee payer's token account as source", func(p *exactParts) { p.source = treasuryATA }, nil, agentsolana.ExactFeePayerInvolved},
		{"fee payer named by a memo", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction {
				return append(ixs, solana.NewInstruction(agentsolana.MemoProgramID, solana.AccountMetaSlice{solana.Meta(treasury.PublicKey())}, []byte("x")))
			}
		}, nil, agentsolana.ExactUnknownInstruction},
		{"fee payer named by a Lighthouse assertion", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction {
				return append(ixs, solana.NewInstruction(agentsolana.LighthouseProgramID, solana.AccountMetaSlice{solana.Meta(treasury.PublicKey()).WRITE()}, []byte{0}))
			}
		}, nil, agentsolana.ExactFeePayerInvolved},
		{"another fee payer", func(p *exactParts) { p.feePayer = stranger.PublicKey() }, nil, agentsolana.ExactFeePayerMismatch},
		{"wrong amount", func(p *exactParts) { p.amount = 1_499_999 }, nil, agentsolana.ExactAmountMismatch},
		{"more than asked", func(p *exactParts) { p.amount = 1_500_001 }, nil, agentsolana.ExactAmountMismatch},
		{"wrong mint", func(p *exactParts) {
			p.mint = stranger.PublicKey()
			p.dest = ata(t, payTo, p.mint)
		}, nil, agentsolana.ExactMintMismatch},
		{"wrong decimals", func(p *exactParts) { p.decimals = 9 }, nil, agentsolana.ExactMintMismatch},
		{"wrong destination", func(p *exactParts) { p.dest = ata(t, stranger.PublicKey(), mint) }, nil, agentsolana.ExactRecipientMismatch},
		{"payTo's wallet instead of its token account", func(p *exactParts) { p.dest = payTo }, nil, agentsolana.ExactRecipientMismatch},
		{"extra instruction: a second transfer", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction {
				return append(ixs, transferChecked(p.source, mint, ata(t, stranger.PublicKey(), mint), payer.PublicKey(), 1, 6))
			}
		}, nil, agentsolana.ExactUnknownInstruction},
		{"extra instruction before the transfer", func(p *exactParts) { p.edit = insert(2, memoIx([]byte("x"))) }, nil, agentsolana.ExactNoTransfer},
		{"too many instructions", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction {
				for range 5 {
					ixs = append(ixs, memoIx([]byte("m")))
				}
				return ixs
			}
		}, nil, agentsolana.ExactInstructionsLength},
		{"no compute unit limit", func(p *exactParts) { p.edit = func(ixs []solana.Instruction) []solana.Instruction { return ixs[1:] } }, nil, agentsolana.ExactComputeLimit},
		{"compute instructions swapped", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction { ixs[0], ixs[1] = ixs[1], ixs[0]; return ixs }
		}, nil, agentsolana.ExactComputeLimit},
		{"too-high compute price", func(p *exactParts) { p.price = agentsolana.ExactMaxComputeUnitPrice + 1 }, nil, agentsolana.ExactComputePriceTooHigh},
		{"too-high compute limit", func(p *exactParts) { p.limit = agentsolana.ExactMaxComputeUnitLimit + 1 }, nil, agentsolana.ExactComputeLimitTooHigh},
		{"missing payer signature", func(p *exactParts) { p.unsigned = true }, nil, agentsolana.ExactSignatureInvalid},
		{"signed by someone else", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction { return ixs }
			p.signer = stranger
		}, nil, agentsolana.ExactSignatureInvalid},
		{"a third signer", func(p *exactParts) {
			p.edit = insert(3, solana.NewInstruction(agentsolana.MemoProgramID, solana.AccountMetaSlice{solana.Meta(stranger.PublicKey()).SIGNER()}, []byte("x")))
		}, nil, agentsolana.ExactExcessiveSigners},
		{"transfer with a multisig signer", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction {
				ix := ixs[2]
				data, _ := ix.Data()
				ixs[2] = solana.NewInstruction(solana.TokenProgramID, append(ix.Accounts(), solana.Meta(stranger.PublicKey())), data)
				return ixs
			}
		}, nil, agentsolana.ExactNoTransfer},
		{"plain Transfer, not TransferChecked", func(p *exactParts) {
			p.edit = func(ixs []solana.Instruction) []solana.Instruction {
				d := make([]byte, 9)
				d[0] = 3
				binary.LittleEndian.PutUint64(d[1:], p.amount)
				ixs[2] = solana.NewInstruction(solana.TokenProgramID, solana.AccountMetaSlice{
					solana.Meta(p.source).WRITE(), solana.Meta(p.dest).WRITE(), solana.Meta(payer.PublicKey()).SIGNER(),
				}, d)
				return ixs
			}
		}, nil, agentsolana.ExactNoTransfer},
		{"memo asked, none carried", func(p *exactParts) { p.memo = nil }, func(r *agentsolana.ExactRequirements) { r.Memo = "cs_test_memo" }, agentsolana.ExactMemoCount},
		{"another memo", func(p *exactParts) { p.memo = []byte("cs_other") }, func(r *agentsolana.ExactRequirements) { r.Memo = "cs_test_memo" }, agentsolana.ExactMemoMismatch},
		{"memo too long", func(p *exactParts) { p.memo = make([]byte, agentsolana.ExactMaxMemoBytes+1) }, nil, agentsolana.ExactUnknownInstruction},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts, r := exactCase(t, treasury, payer, payTo, mint, solana.Hash{7})
			tc.change(&parts)
			if tc.req != nil {
				tc.req(&r)
			}
			p, err := agentsolana.DecodeExact(parts.build(t))
			if err == nil {
				err = p.Verify(r)
			}
			require.Error(t, err)
			refusal := agentsolana.AsExactRefusal(err)
			require.NotNil(t, refusal, "%v", err)
			require.Equal(t, tc.reason, refusal.Reason, refusal.Message)
			require.ErrorIs(t, err, chains.ErrRefused)
		})
	}

	for _, tc := range []struct{ name, tx string }{
		{"not base64", "!!"},
		{"empty", ""},
		{"garbage", base64.StdEncoding.EncodeToString([]byte{1, 2, 3})},
		{"trailing bytes", good.build(t) + "AAAA"},
		{"too large", base64.StdEncoding.EncodeToString(make([]byte, agentsolana.ExactMaxTransactionBytes+1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentsolana.DecodeExact(tc.tx)
			require.Equal(t, agentsolana.ExactUndecodable, agentsolana.AsExactRefusal(err).Reason, "%v", err)
		})
	}
}

// TestSettleExact: on the devnet, a payer holding USDC and no SOL pays
// payTo (whose token account does not exist yet) by an exact transaction
// the treasury co-signs: payTo receives the amount, the payer pays no
// fee, the treasury pays it; settling the same payload again sends
// nothing more; an expired blockhash and a payer short of the amount are
// refused with nothing sent.
func TestSettleExact(t *testing.T) {
	c := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	payer, payTo := newKey(t), newKey(t).PublicKey()
	fund, err := c.dn.Send(ctx, payer.PublicKey(), 5_000_000)
	require.NoError(t, err)
	_, err = c.ledger.Wait(ctx, fund.String())
	require.NoError(t, err)
	bh, err := c.dn.Client().GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	parts, req := exactCase(t, c.treasury, payer, payTo, c.dn.Mint, bh.Value.Blockhash)
	req2, err := c.ledger.ExactRequirementsFor(payTo.String(), big.NewInt(1_500_000), "")
	require.NoError(t, err)
	require.Equal(t, req, req2)

	treasuryBefore := lamports(t, c, c.treasury.PublicKey())
	p, err := agentsolana.DecodeExact(parts.build(t))
	require.NoError(t, err)
	want, err := c.ledger.ExactSignature(p)
	require.NoError(t, err)
	sub, err := c.ledger.SettleExactPayment(ctx, p, req)
	require.NoError(t, err)
	require.Equal(t, want, sub.TxHash)
	require.Equal(t, payer.PublicKey().String(), sub.From)
	require.NotEmpty(t, sub.AccountTx, "payTo had no token account: the treasury opened it")
	rc, err := c.ledger.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, rc.State, rc.Err)

	bal, err := c.ledger.Balance(ctx, payTo.String())
	require.NoError(t, err)
	require.Equal(t, int64(1_500_000), bal.Int64())
	bal, err = c.ledger.Balance(ctx, payer.PublicKey().String())
	require.NoError(t, err)
	require.Equal(t, int64(3_500_000), bal.Int64())
	require.Zero(t, lamports(t, c, payer.PublicKey()), "the payer holds no SOL and paid no fee")
	require.Less(t, lamports(t, c, c.treasury.PublicKey()), treasuryBefore, "the treasury paid the fee and payTo's account rent")
	deps, err := c.ledger.DepositsIn(ctx, sub.TxHash, payTo.String())
	require.NoError(t, err)
	require.Len(t, deps, 1)
	require.Equal(t, payer.PublicKey().String(), deps[0].From)

	// The same payload again: the same transaction, not a second one.
	again, err := c.ledger.SettleExactPayment(ctx, p, req)
	require.NoError(t, err)
	require.Equal(t, sub.TxHash, again.TxHash)
	require.Empty(t, again.AccountTx)
	bal, err = c.ledger.Balance(ctx, payTo.String())
	require.NoError(t, err)
	require.Equal(t, int64(1_500_000), bal.Int64())

	t.Run("short of the amount", func(t *testing.T) {
		poor := newKey(t)
		parts, req := exactCase(t, c.treasury, poor, payTo, c.dn.Mint, bh.Value.Blockhash)
		p, err := agentsolana.DecodeExact(parts.build(t))
		require.NoError(t, err)
		_, err = c.ledger.SettleExactPayment(ctx, p, req)
		require.ErrorIs(t, err, chains.ErrInsufficientFunds)
	})
	t.Run("expired blockhash", func(t *testing.T) {
		parts, req := exactCase(t, c.treasury, payer, payTo, c.dn.Mint, solana.Hash{9})
		p, err := agentsolana.DecodeExact(parts.build(t))
		require.NoError(t, err)
		_, err = c.ledger.SettleExactPayment(ctx, p, req)
		require.Equal(t, agentsolana.ExactBlockhashExpired, agentsolana.AsExactRefusal(err).Reason, "%v", err)
	})
}

func lamports(t testing.TB, c *testChain, pk solana.PublicKey) uint64 {
	t.Helper()
	b, err := c.dn.Client().GetBalance(context.Background(), pk, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	return b.Value
}
