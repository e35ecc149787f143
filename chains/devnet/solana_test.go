package devnet

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

func startSolana(t *testing.T, cfg SolanaConfig) *Solana {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartSolana(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func splTokenAmount(t *testing.T, data []byte) uint64 {
	t.Helper()
	require.GreaterOrEqual(t, len(data), 165)
	return binary.LittleEndian.Uint64(data[64:72])
}

func solanaRPCError(t *testing.T, err error) *jsonrpc.RPCError {
	t.Helper()
	require.Error(t, err)
	var re *jsonrpc.RPCError
	require.True(t, errors.As(err, &re), "want an RPC error, got %T: %v", err, err)
	return re
}

// solanaTransferTx builds a TransferChecked from the payer's token account.
func solanaTransferTx(t testing.TB, s *Solana, to solana.PublicKey, amount uint64, blockhash solana.Hash) *solana.Transaction {
	t.Helper()
	payer := s.Payer.PublicKey()
	src, _, err := solana.FindAssociatedTokenAddress(payer, s.Mint)
	require.NoError(t, err)
	dst, _, err := solana.FindAssociatedTokenAddress(to, s.Mint)
	require.NoError(t, err)
	create := solana.NewInstruction(solana.SPLAssociatedTokenAccountProgramID, solana.AccountMetaSlice{
		solana.Meta(payer).WRITE().SIGNER(), solana.Meta(dst).WRITE(), solana.Meta(to), solana.Meta(s.Mint),
		solana.Meta(solana.SystemProgramID), solana.Meta(solana.TokenProgramID),
	}, []byte{1})
	transfer := token.NewTransferCheckedInstruction(amount, SolanaDecimals, src, s.Mint, dst, payer, nil).Build()
	tx, err := solana.NewTransaction([]solana.Instruction{create, transfer}, blockhash, solana.TransactionPayer(payer))
	require.NoError(t, err)
	_, err = tx.Sign(func(k solana.PublicKey) *solana.PrivateKey {
		if k.Equals(payer) {
			return &s.Payer
		}
		return nil
	})
	require.NoError(t, err)
	return tx
}

func TestSolanaDevnet(t *testing.T) {
	t.Parallel()
	treasury := solana.NewWallet().PublicKey()
	s := startSolana(t, SolanaConfig{
		SlotTime:       50 * time.Millisecond,
		FinalizedDepth: 8,
		Fund:           []solana.PublicKey{treasury},
	})
	ctx := context.Background()
	c := s.Client()
	payer := s.Payer.PublicKey()
	payerATA, _, err := solana.FindAssociatedTokenAddress(payer, s.Mint)
	require.NoError(t, err)

	t.Run("Genesis", func(t *testing.T) {
		bal, err := c.GetBalance(ctx, treasury, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, uint64(1000*solana.LAMPORTS_PER_SOL), bal.Value)

		tb, err := c.GetTokenAccountBalance(ctx, payerATA, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, uint8(SolanaDecimals), tb.Value.Decimals)
		require.Greater(t, len(tb.Value.Amount), 12)

		supply, err := c.GetTokenSupply(ctx, s.Mint, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, "1000000000000000", supply.Value.Amount)

		rent, err := c.GetMinimumBalanceForRentExemption(ctx, 165, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, uint64(2039280), rent)

		health, err := c.GetHealth(ctx)
		require.NoError(t, err)
		require.Equal(t, "ok", health)
		v, err := c.GetVersion(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, v.SolanaCore)
		gh, err := c.GetGenesisHash(ctx)
		require.NoError(t, err)
		require.False(t, gh.IsZero())

		// Finalized first: a slot produced between the two reads can only
		// raise the processed one read second.
		finalized, err := c.GetSlot(ctx, rpc.CommitmentFinalized)
		require.NoError(t, err)
		processed, err := c.GetSlot(ctx, rpc.CommitmentProcessed)
		require.NoError(t, err)
		require.GreaterOrEqual(t, processed, finalized+8)
		height, err := c.GetBlockHeight(ctx, rpc.CommitmentProcessed)
		require.NoError(t, err)
		require.Less(t, height, processed)
	})

	t.Run("SendAndRead", func(t *testing.T) {
		owner := solana.NewWallet().PublicKey()
		ata, _, err := solana.FindAssociatedTokenAddress(owner, s.Mint)
		require.NoError(t, err)
		before, err := c.GetTokenAccountBalance(ctx, payerATA, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		payerBefore, err := strconv.ParseUint(before.Value.Amount, 10, 64)
		require.NoError(t, err)

		const amount = 1_234_567
		sig, err := s.Send(ctx, owner, amount)
		require.NoError(t, err)

		// getTokenAccountsByOwner, base64 and jsonParsed.
		accts, err := c.GetTokenAccountsByOwner(ctx, owner, &rpc.GetTokenAccountsConfig{Mint: &s.Mint},
			&rpc.GetTokenAccountsOpts{Commitment: rpc.CommitmentConfirmed, Encoding: solana.EncodingBase64})
		require.NoError(t, err)
		require.Len(t, accts.Value, 1)
		require.Equal(t, ata, accts.Value[0].Pubkey)
		require.Equal(t, solana.TokenProgramID, accts.Value[0].Account.Owner)
		require.Equal(t, uint64(amount), splTokenAmount(t, accts.Value[0].Account.Data.GetBinary()))

		parsed, err := c.GetTokenAccountsByOwner(ctx, owner, &rpc.GetTokenAccountsConfig{ProgramId: &solana.TokenProgramID},
			&rpc.GetTokenAccountsOpts{Commitment: rpc.CommitmentConfirmed, Encoding: solana.EncodingJSONParsed})
		require.NoError(t, err)
		require.Len(t, parsed.Value, 1)
		var info struct {
			Parsed struct {
				Info struct {
					Mint        string `json:"mint"`
					Owner       string `json:"owner"`
					TokenAmount struct {
						Amount   string `json:"amount"`
						Decimals int    `json:"decimals"`
					} `json:"tokenAmount"`
				} `json:"info"`
				Type string `json:"type"`
			} `json:"parsed"`
			Program string `json:"program"`
		}
		require.NoError(t, json.Unmarshal(parsed.Value[0].Account.Data.GetRawJSON(), &info))
		require.Equal(t, "spl-token", info.Program)
		require.Equal(t, "account", info.Parsed.Type)
		require.Equal(t, owner.String(), info.Parsed.Info.Owner)
		require.Equal(t, s.Mint.String(), info.Parsed.Info.Mint)
		require.Equal(t, strconv.Itoa(amount), info.Parsed.Info.TokenAmount.Amount)
		require.Equal(t, SolanaDecimals, info.Parsed.Info.TokenAmount.Decimals)

		// getTokenAccountBalance and getMultipleAccounts agree.
		tb, err := c.GetTokenAccountBalance(ctx, ata, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(amount), tb.Value.Amount)
		multi, err := c.GetMultipleAccountsWithOpts(ctx, []solana.PublicKey{ata, payerATA, solana.NewWallet().PublicKey()},
			&rpc.GetMultipleAccountsOpts{Commitment: rpc.CommitmentConfirmed, Encoding: solana.EncodingBase64})
		require.NoError(t, err)
		require.Len(t, multi.Value, 3)
		require.Equal(t, uint64(amount), splTokenAmount(t, multi.Value[0].Data.GetBinary()))
		require.Equal(t, payerBefore-amount, splTokenAmount(t, multi.Value[1].Data.GetBinary()))
		require.Nil(t, multi.Value[2])
		require.Equal(t, uint64(2039280), multi.Value[0].Lamports)

		// jsonParsed and base64+zstd read the same account.
		multiParsed, err := c.GetMultipleAccountsWithOpts(ctx, []solana.PublicKey{ata, s.Mint},
			&rpc.GetMultipleAccountsOpts{Commitment: rpc.CommitmentConfirmed, Encoding: solana.EncodingJSONParsed})
		require.NoError(t, err)
		require.Contains(t, string(multiParsed.Value[0].Data.GetRawJSON()), `"amount":"1234567"`)
		require.Contains(t, string(multiParsed.Value[1].Data.GetRawJSON()), `"type":"mint"`)
		zst, err := c.GetAccountInfoWithOpts(ctx, ata, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed, Encoding: solana.EncodingBase64Zstd})
		require.NoError(t, err)
		require.Equal(t, uint64(amount), splTokenAmount(t, zst.Value.Data.GetBinary()))

		// getBalance: the token account holds its rent, the owner nothing.
		bal, err := c.GetBalance(ctx, ata, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, multi.Value[0].Lamports, bal.Value)
		bal, err = c.GetBalance(ctx, owner, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Zero(t, bal.Value)

		// getTransaction: balances, token balances, fee, logs.
		maxVersion := uint64(0)
		tx, err := c.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{
			Encoding: solana.EncodingBase64, Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: &maxVersion,
		})
		require.NoError(t, err)
		require.Nil(t, tx.Meta.Err)
		require.Equal(t, uint64(5000), tx.Meta.Fee)
		require.NotEmpty(t, tx.Meta.LogMessages)
		decoded, err := tx.Transaction.GetTransaction()
		require.NoError(t, err)
		require.Equal(t, sig, decoded.Signatures[0])
		keys := decoded.Message.AccountKeys
		require.Len(t, tx.Meta.PreBalances, len(keys))
		require.Equal(t, keys[0], payer)
		require.Equal(t, tx.Meta.PreBalances[0]-5000-2039280, tx.Meta.PostBalances[0])

		post := map[solana.PublicKey]string{}
		for _, b := range tx.Meta.PostTokenBalances {
			require.Equal(t, s.Mint, b.Mint)
			post[keys[b.AccountIndex]] = b.UiTokenAmount.Amount
		}
		require.Equal(t, strconv.Itoa(amount), post[ata])
		require.Equal(t, strconv.FormatUint(payerBefore-amount, 10), post[payerATA])
		require.Len(t, tx.Meta.PreTokenBalances, 1, "the recipient's account did not exist before")

		// json encoding too.
		jtx, err := c.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Commitment: rpc.CommitmentConfirmed}) // json, the default
		require.NoError(t, err)
		parsedTx, err := jtx.Transaction.GetTransaction()
		require.NoError(t, err)
		require.Equal(t, keys, parsedTx.Message.AccountKeys)
		require.Equal(t, rpc.LegacyTransactionVersion, tx.Version)

		// jsonParsed: the transfer as a parsed transferChecked.
		ptx, err := c.GetParsedTransaction(ctx, sig, &rpc.GetParsedTransactionOpts{Commitment: rpc.CommitmentConfirmed})
		require.NoError(t, err)
		var found bool
		for _, ix := range ptx.Transaction.Message.Instructions {
			if ix.Program != "spl-token" || ix.Parsed == nil {
				continue
			}
			raw, err := json.Marshal(ix.Parsed)
			require.NoError(t, err)
			var p struct {
				Type string `json:"type"`
				Info struct {
					Source, Destination, Mint, Authority string
					TokenAmount                          struct{ Amount string }
				} `json:"info"`
			}
			require.NoError(t, json.Unmarshal(raw, &p))
			require.Equal(t, "transferChecked", p.Type)
			require.Equal(t, payerATA.String(), p.Info.Source)
			require.Equal(t, ata.String(), p.Info.Destination)
			require.Equal(t, payer.String(), p.Info.Authority)
			require.Equal(t, strconv.Itoa(amount), p.Info.TokenAmount.Amount)
			found = true
		}
		require.True(t, found, "no parsed transferChecked")

		// getBlock holds the transaction in its slot.
		full := rpc.TransactionDetailsSignatures
		block, err := c.GetBlockWithOpts(ctx, tx.Slot, &rpc.GetBlockOpts{Commitment: rpc.CommitmentConfirmed, TransactionDetails: full})
		require.NoError(t, err)
		require.Contains(t, block.Signatures, sig)
		require.NotNil(t, block.BlockHeight)

		// getSignaturesForAddress: by the token account and by the owner.
		for _, addr := range []solana.PublicKey{ata, owner} {
			sigs, err := c.GetSignaturesForAddressWithOpts(ctx, addr, &rpc.GetSignaturesForAddressOpts{Commitment: rpc.CommitmentConfirmed})
			require.NoError(t, err)
			require.Len(t, sigs, 1)
			require.Equal(t, sig, sigs[0].Signature)
			require.Nil(t, sigs[0].Err)
			require.NotNil(t, sigs[0].Memo)
		}
	})

	t.Run("ConcurrentSends", func(t *testing.T) {
		owner := solana.NewWallet().PublicKey()
		const n = 8
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := s.Send(ctx, owner, 1_000_000) // the same transfer each time
				errs <- err
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		ata, _, err := solana.FindAssociatedTokenAddress(owner, s.Mint)
		require.NoError(t, err)
		tb, err := c.GetTokenAccountBalance(ctx, ata, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(n*1_000_000), tb.Value.Amount)
		require.Equal(t, "8", tb.Value.UiAmountString)
	})

	t.Run("SignaturesForAddressPaging", func(t *testing.T) {
		owner := solana.NewWallet().PublicKey()
		ata, _, err := solana.FindAssociatedTokenAddress(owner, s.Mint)
		require.NoError(t, err)
		var sent []solana.Signature
		for i := range 3 {
			sig, err := s.Send(ctx, owner, uint64(10+i))
			require.NoError(t, err)
			sent = append(sent, sig)
		}
		all, err := c.GetSignaturesForAddressWithOpts(ctx, ata, &rpc.GetSignaturesForAddressOpts{Commitment: rpc.CommitmentConfirmed})
		require.NoError(t, err)
		require.Len(t, all, 3)
		require.Equal(t, sent[2], all[0].Signature, "newest first")
		require.Equal(t, sent[0], all[2].Signature)

		limit := 1
		page, err := c.GetSignaturesForAddressWithOpts(ctx, ata, &rpc.GetSignaturesForAddressOpts{
			Commitment: rpc.CommitmentConfirmed, Before: sent[2], Limit: &limit,
		})
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, sent[1], page[0].Signature)

		page, err = c.GetSignaturesForAddressWithOpts(ctx, ata, &rpc.GetSignaturesForAddressOpts{
			Commitment: rpc.CommitmentConfirmed, Until: sent[0],
		})
		require.NoError(t, err)
		require.Len(t, page, 2)
		require.Equal(t, sent[2], page[0].Signature)
		require.Equal(t, sent[1], page[1].Signature)

		tb, err := c.GetTokenAccountBalance(ctx, ata, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.Equal(t, "33", tb.Value.Amount)
	})

	t.Run("FailingTransactionIsRefusedInPreflight", func(t *testing.T) {
		bh, err := c.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
		require.NoError(t, err)
		solBefore, err := c.GetBalance(ctx, payer, rpc.CommitmentProcessed)
		require.NoError(t, err)
		// More than the payer holds: the token program fails with InsufficientFunds (0x1).
		tx := solanaTransferTx(t, s, solana.NewWallet().PublicKey(), 1<<62, bh.Value.Blockhash)
		_, err = c.SendTransaction(ctx, tx)
		re := solanaRPCError(t, err)
		require.Equal(t, -32002, re.Code)
		require.Contains(t, re.Message, "Transaction simulation failed: Error processing Instruction 1: custom program error: 0x1")
		data, ok := re.Data.(map[string]any)
		require.True(t, ok, "data: %#v", re.Data)
		require.Contains(t, data, "logs")
		require.Contains(t, data, "unitsConsumed")
		errJSON, err := json.Marshal(data["err"])
		require.NoError(t, err)
		require.JSONEq(t, `{"InstructionError":[1,{"Custom":1}]}`, string(errJSON))

		// Nothing was charged and nothing landed.
		solAfter, err := c.GetBalance(ctx, payer, rpc.CommitmentProcessed)
		require.NoError(t, err)
		require.Equal(t, solBefore.Value, solAfter.Value)
		st, err := c.GetSignatureStatuses(ctx, true, tx.Signatures[0])
		require.NoError(t, err)
		require.Nil(t, st.Value[0])

		// simulateTransaction reports the same error as a result.
		sim, err := c.SimulateTransaction(ctx, tx)
		require.NoError(t, err)
		require.NotNil(t, sim.Value.Err)
		require.NotEmpty(t, sim.Value.Logs)
	})

	t.Run("FailingTransactionLandsWithoutPreflight", func(t *testing.T) {
		bh, err := c.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		solBefore, err := c.GetBalance(ctx, payer, rpc.CommitmentProcessed)
		require.NoError(t, err)
		tx := solanaTransferTx(t, s, solana.NewWallet().PublicKey(), 1<<62, bh.Value.Blockhash)
		sig, err := c.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{SkipPreflight: true})
		require.NoError(t, err)

		// It is included, failed, and charged its fee (the ATA creation rolled back).
		st, err := c.GetSignatureStatuses(ctx, true, sig)
		require.NoError(t, err)
		require.NotNil(t, st.Value[0])
		require.NotNil(t, st.Value[0].Err)
		solAfter, err := c.GetBalance(ctx, payer, rpc.CommitmentProcessed)
		require.NoError(t, err)
		require.Equal(t, solBefore.Value-5000, solAfter.Value)

		require.Eventually(t, func() bool {
			st, err := c.GetSignatureStatuses(ctx, true, sig)
			return err == nil && st.Value[0].ConfirmationStatus != rpc.ConfirmationStatusProcessed
		}, 5*time.Second, 20*time.Millisecond)
		got, err := c.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Commitment: rpc.CommitmentConfirmed})
		require.NoError(t, err)
		require.Equal(t, uint64(5000), got.Meta.Fee)
		errJSON, err := json.Marshal(got.Meta.Err)
		require.NoError(t, err)
		require.JSONEq(t, `{"InstructionError":[1,{"Custom":1}]}`, string(errJSON))
		limitFive := 5
		sigs, err := c.GetSignaturesForAddressWithOpts(ctx, payer, &rpc.GetSignaturesForAddressOpts{Commitment: rpc.CommitmentConfirmed, Limit: &limitFive})
		require.NoError(t, err)
		require.NotEmpty(t, sigs)
		require.Equal(t, sig, sigs[0].Signature)
		require.NotNil(t, sigs[0].Err)
	})

	t.Run("SimulateWithReplacedBlockhash", func(t *testing.T) {
		// An unsigned transaction (zero signatures) with a made-up blockhash,
		// as fee estimators send it.
		owner := solana.NewWallet().PublicKey()
		ata, _, err := solana.FindAssociatedTokenAddress(owner, s.Mint)
		require.NoError(t, err)
		tx := solanaTransferTx(t, s, owner, 3, solana.Hash{1})
		tx.Signatures[0] = solana.Signature{}
		sim, err := c.SimulateTransactionWithOpts(ctx, tx, &rpc.SimulateTransactionOpts{
			ReplaceRecentBlockhash: true,
			Commitment:             rpc.CommitmentProcessed,
			Accounts:               &rpc.SimulateTransactionAccountsOpts{Encoding: solana.EncodingBase64, Addresses: []solana.PublicKey{ata}},
		})
		require.NoError(t, err)
		require.Nil(t, sim.Value.Err)
		require.NotNil(t, sim.Value.UnitsConsumed)
		require.Positive(t, *sim.Value.UnitsConsumed)
		require.Len(t, sim.Value.Accounts, 1)
		require.Equal(t, uint64(3), splTokenAmount(t, sim.Value.Accounts[0].Data.GetBinary()))

		// Nothing was written.
		acct, err := c.GetAccountInfoWithOpts(ctx, ata, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentProcessed})
		require.ErrorIs(t, err, rpc.ErrNotFound)
		require.Nil(t, acct)

		sim, err = c.SimulateTransactionWithOpts(ctx, tx, &rpc.SimulateTransactionOpts{Commitment: rpc.CommitmentProcessed})
		require.NoError(t, err)
		require.Equal(t, "BlockhashNotFound", sim.Value.Err)
	})

	t.Run("BadTransactions", func(t *testing.T) {
		bh, err := c.GetLatestBlockhash(ctx, rpc.CommitmentFinalized)
		require.NoError(t, err)

		// A blockhash the chain never produced.
		tx := solanaTransferTx(t, s, solana.NewWallet().PublicKey(), 1, solana.Hash(solana.NewWallet().PublicKey()))
		_, err = c.SendTransaction(ctx, tx)
		re := solanaRPCError(t, err)
		require.Equal(t, -32002, re.Code)
		require.Equal(t, "Transaction simulation failed: Blockhash not found", re.Message)

		// A bad signature.
		tx = solanaTransferTx(t, s, solana.NewWallet().PublicKey(), 1, bh.Value.Blockhash)
		tx.Signatures[0][0] ^= 0xff
		_, err = c.SendTransaction(ctx, tx)
		re = solanaRPCError(t, err)
		require.Equal(t, -32003, re.Code)

		// Not a transaction.
		_, err = c.SendEncodedTransaction(ctx, base64.StdEncoding.EncodeToString([]byte{1, 2, 3}))
		re = solanaRPCError(t, err)
		require.Equal(t, -32602, re.Code)

		// base58 encoding, then the same transaction again.
		tx = solanaTransferTx(t, s, solana.NewWallet().PublicKey(), 7, bh.Value.Blockhash)
		raw, err := tx.MarshalBinary()
		require.NoError(t, err)
		sig, err := c.SendEncodedTransactionWithOpts(ctx, solana.Base58(raw).String(), rpc.TransactionOpts{Encoding: solana.EncodingBase58})
		require.NoError(t, err)
		require.Equal(t, tx.Signatures[0], sig)
		_, err = c.SendTransaction(ctx, tx)
		re = solanaRPCError(t, err)
		require.Equal(t, -32002, re.Code)
		require.Contains(t, re.Message, "already been processed")
	})

	t.Run("AirdropAndFee", func(t *testing.T) {
		who := solana.NewWallet().PublicKey()
		sig, err := c.RequestAirdrop(ctx, who, 3*solana.LAMPORTS_PER_SOL, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.False(t, sig.IsZero())
		bal, err := c.GetBalance(ctx, who, rpc.CommitmentProcessed)
		require.NoError(t, err)
		require.Equal(t, uint64(3*solana.LAMPORTS_PER_SOL), bal.Value)

		bh, err := c.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
		require.NoError(t, err)
		tx, err := solana.NewTransaction([]solana.Instruction{
			system.NewTransferInstruction(1, who, treasury).Build(),
		}, bh.Value.Blockhash, solana.TransactionPayer(who))
		require.NoError(t, err)
		msg, err := tx.Message.MarshalBinary()
		require.NoError(t, err)
		fee, err := c.GetFeeForMessage(ctx, base64.StdEncoding.EncodeToString(msg), rpc.CommitmentConfirmed)
		require.NoError(t, err)
		require.NotNil(t, fee.Value)
		require.Equal(t, uint64(5000), *fee.Value)
	})
}

// TestSolanaCommitment follows one transaction from processed to finalized.
func TestSolanaCommitment(t *testing.T) {
	t.Parallel()
	// Deep enough that a loaded machine still catches the confirmed window
	// (depth-1 slots of 250 ms).
	const depth = 16
	s := startSolana(t, SolanaConfig{SlotTime: 250 * time.Millisecond, FinalizedDepth: depth})
	ctx := context.Background()
	c := s.Client()

	// Send until a transaction is seen in the slot it landed in (a slot may
	// pass between sending and asking, rarely).
	var sig solana.Signature
	var owner solana.PublicKey
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 5, "never saw a transaction at processed")
		bh, err := c.GetLatestBlockhash(ctx, rpc.CommitmentProcessed)
		require.NoError(t, err)
		owner = solana.NewWallet().PublicKey()
		tx := solanaTransferTx(t, s, owner, 5, bh.Value.Blockhash)
		sig, err = c.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{PreflightCommitment: rpc.CommitmentProcessed})
		require.NoError(t, err)
		st, err := c.GetSignatureStatuses(ctx, false, sig)
		require.NoError(t, err)
		require.NotNil(t, st.Value[0])
		if st.Value[0].ConfirmationStatus == rpc.ConfirmationStatusProcessed {
			break
		}
	}

	// Seen at processed just now: the loop below may start a slot later.
	seen := map[rpc.ConfirmationStatusType]bool{rpc.ConfirmationStatusProcessed: true}
	deadline := time.Now().Add(20 * time.Second)
	var last *rpc.SignatureStatusesResult
	for time.Now().Before(deadline) {
		st, err := c.GetSignatureStatuses(ctx, false, sig)
		require.NoError(t, err)
		v := st.Value[0]
		require.NotNil(t, v)
		require.Nil(t, v.Err)
		slot := st.Context.Slot
		switch v.ConfirmationStatus {
		case rpc.ConfirmationStatusProcessed:
			require.Equal(t, slot, v.Slot)
			require.NotNil(t, v.Confirmations)
			require.Zero(t, *v.Confirmations)
		case rpc.ConfirmationStatusConfirmed:
			require.GreaterOrEqual(t, slot, v.Slot+1)
			require.Less(t, slot, v.Slot+depth)
			require.NotNil(t, v.Confirmations)
		case rpc.ConfirmationStatusFinalized:
			require.GreaterOrEqual(t, slot, v.Slot+depth)
			require.Nil(t, v.Confirmations)
		default:
			t.Fatalf("unexpected status %q", v.ConfirmationStatus)
		}
		if !seen[v.ConfirmationStatus] {
			// Reads at each commitment agree with the status.
			_, txErr := c.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Commitment: rpc.CommitmentFinalized})
			sigs, err := c.GetSignaturesForAddressWithOpts(ctx, owner, &rpc.GetSignaturesForAddressOpts{Commitment: rpc.CommitmentFinalized})
			require.NoError(t, err)
			after, err := c.GetSignatureStatuses(ctx, false, sig)
			require.NoError(t, err)
			switch {
			case v.ConfirmationStatus == rpc.ConfirmationStatusFinalized:
				require.NoError(t, txErr)
				require.Len(t, sigs, 1)
			case after.Value[0].ConfirmationStatus != rpc.ConfirmationStatusFinalized:
				// Still not finalized after the reads: they saw nothing.
				require.ErrorIs(t, txErr, rpc.ErrNotFound)
				require.Empty(t, sigs)
			}
		}
		seen[v.ConfirmationStatus] = true
		last = v
		if v.ConfirmationStatus == rpc.ConfirmationStatusFinalized {
			break
		}
		time.Sleep(40 * time.Millisecond)
	}
	require.NotNil(t, last)
	require.Equal(t, rpc.ConfirmationStatusFinalized, last.ConfirmationStatus)
	require.True(t, seen[rpc.ConfirmationStatusProcessed], "processed was never observed")
	require.True(t, seen[rpc.ConfirmationStatusConfirmed], "confirmed was never observed")
}

// TestSolanaStaleBlockhash lets a blockhash age past its 150 slots.
func TestSolanaStaleBlockhash(t *testing.T) {
	t.Parallel()
	s := startSolana(t, SolanaConfig{SlotTime: 5 * time.Millisecond, FinalizedDepth: 4})
	ctx := context.Background()
	c := s.Client()

	bh, err := c.GetLatestBlockhash(ctx, rpc.CommitmentProcessed)
	require.NoError(t, err)
	valid, err := c.IsBlockhashValid(ctx, bh.Value.Blockhash, rpc.CommitmentProcessed)
	require.NoError(t, err)
	require.True(t, valid.Value)

	require.Eventually(t, func() bool {
		h, err := c.GetBlockHeight(ctx, rpc.CommitmentProcessed)
		return err == nil && h > bh.Value.LastValidBlockHeight
	}, 20*time.Second, 20*time.Millisecond)

	valid, err = c.IsBlockhashValid(ctx, bh.Value.Blockhash, rpc.CommitmentProcessed)
	require.NoError(t, err)
	require.False(t, valid.Value)

	tx := solanaTransferTx(t, s, solana.NewWallet().PublicKey(), 1, bh.Value.Blockhash)
	_, err = c.SendTransaction(ctx, tx)
	re := solanaRPCError(t, err)
	require.Equal(t, -32002, re.Code)
	require.Contains(t, re.Message, "Blockhash not found")
	// Refused even without preflight: it could never land.
	_, err = c.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{SkipPreflight: true})
	re = solanaRPCError(t, err)
	require.Equal(t, -32002, re.Code)

	// A fresh blockhash works.
	_, err = s.Send(ctx, solana.NewWallet().PublicKey(), 1)
	require.NoError(t, err)
}

func TestSolanaMissingNodeModules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "server.js"), nil, 0o644))
	_, err := StartSolana(context.Background(), SolanaConfig{Dir: dir})
	require.ErrorContains(t, err, "run npm ci in chains/devnet/solana-rpc")
}

// TestSolanaExitsWhenStdinCloses: a parent that dies never leaves the server behind.
func TestSolanaExitsWhenStdinCloses(t *testing.T) {
	t.Parallel()
	s := startSolana(t, SolanaConfig{})
	require.NoError(t, s.stdin.Close())
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not exit when its stdin closed")
	}
	_, err := s.Client().GetHealth(context.Background())
	require.Error(t, err)
}

// BenchmarkSolanaTransfer measures sequential token transfers through the
// RPC with preflight, as the service's adapter sends them.
func BenchmarkSolanaTransfer(b *testing.B) {
	ctx := context.Background()
	s, err := StartSolana(ctx, SolanaConfig{SlotTime: 100 * time.Millisecond})
	require.NoError(b, err)
	defer s.Close()
	c := s.Client()
	to := solana.NewWallet().PublicKey()
	_, err = s.Send(ctx, to, 1)
	require.NoError(b, err)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		bh, err := c.GetLatestBlockhash(ctx, rpc.CommitmentProcessed)
		require.NoError(b, err)
		tx := solanaTransferTx(b, s, to, uint64(i+1), bh.Value.Blockhash)
		_, err = c.SendTransaction(ctx, tx)
		require.NoError(b, err)
	}
}

// TestSolanaPubSub subscribes over the websocket like a wallet would.
func TestSolanaPubSub(t *testing.T) {
	t.Parallel()
	s := startSolana(t, SolanaConfig{SlotTime: 50 * time.Millisecond, FinalizedDepth: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, s.WSURL, nil)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(15*time.Second)))

	type message struct {
		ID     *int                `json:"id"`
		Result json.RawMessage     `json:"result"`
		Error  *struct{ Code int } `json:"error"`
		Method string              `json:"method"`
		Params struct {
			Result       json.RawMessage `json:"result"`
			Subscription int             `json:"subscription"`
		} `json:"params"`
	}
	call := func(id int, method string, params ...any) int {
		require.NoError(t, conn.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
		for {
			var m message
			require.NoError(t, conn.ReadJSON(&m))
			if m.ID != nil && *m.ID == id {
				require.Nil(t, m.Error)
				var sub int
				require.NoError(t, json.Unmarshal(m.Result, &sub))
				return sub
			}
		}
	}

	owner := solana.NewWallet().PublicKey()
	ata, _, err := solana.FindAssociatedTokenAddress(owner, s.Mint)
	require.NoError(t, err)
	bh, err := s.Client().GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	tx := solanaTransferTx(t, s, owner, 42, bh.Value.Blockhash)

	sigSub := call(1, "signatureSubscribe", tx.Signatures[0].String(), map[string]any{"commitment": "finalized"})
	acctSub := call(2, "accountSubscribe", ata.String(), map[string]any{"commitment": "confirmed", "encoding": "jsonParsed"})
	logsSub := call(3, "logsSubscribe", map[string]any{"mentions": []string{owner.String()}}, map[string]any{"commitment": "confirmed"})
	slotSub := call(4, "slotSubscribe")

	sig, err := s.Client().SendTransaction(ctx, tx)
	require.NoError(t, err)

	var gotSig, gotAcct, gotLogs, gotSlot bool
	for !(gotSig && gotAcct && gotLogs && gotSlot) {
		var m message
		require.NoError(t, conn.ReadJSON(&m))
		switch m.Method {
		case "signatureNotification":
			require.Equal(t, sigSub, m.Params.Subscription)
			require.JSONEq(t, `{"err":null}`, string(gjsonValue(t, m.Params.Result)))
			st, err := s.Client().GetSignatureStatuses(ctx, false, sig)
			require.NoError(t, err)
			require.Equal(t, rpc.ConfirmationStatusFinalized, st.Value[0].ConfirmationStatus)
			gotSig = true
		case "accountNotification":
			require.Equal(t, acctSub, m.Params.Subscription)
			require.Contains(t, string(m.Params.Result), `"amount":"42"`)
			gotAcct = true
		case "logsNotification":
			require.Equal(t, logsSub, m.Params.Subscription)
			require.Contains(t, string(m.Params.Result), sig.String())
			gotLogs = true
		case "slotNotification":
			require.Equal(t, slotSub, m.Params.Subscription)
			gotSlot = true
		}
	}
}

// gjsonValue returns the "value" member of a {context, value} result.
func gjsonValue(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	return r.Value
}

// TestSolanaSkippedSlots: with SkipEvery, empty slots the rule names have no
// block, as on a real cluster: getBlocks leaves them out, getBlock answers
// -32007, the next block's parent is the block before; a slot a transaction
// landed in always has its block, which getBlock serves with the
// "accounts" details (parsed keys, token balances with their owner) a
// deposit scan reads.
func TestSolanaSkippedSlots(t *testing.T) {
	s := startSolana(t, SolanaConfig{SlotTime: 20 * time.Millisecond, SkipEvery: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.Client()
	key, err := solana.NewRandomPrivateKey()
	require.NoError(t, err)
	owner := key.PublicKey()
	start, err := c.GetSlot(ctx, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	sig, err := s.Send(ctx, owner, 42)
	require.NoError(t, err)
	time.Sleep(20 * 20 * time.Millisecond)
	end, err := c.GetSlot(ctx, rpc.CommitmentConfirmed)
	require.NoError(t, err)

	produced, err := c.GetBlocks(ctx, start, &end, rpc.CommitmentConfirmed)
	require.NoError(t, err)
	require.Less(t, uint64(len(produced)), end-start+1, "some slots skipped")
	has := map[uint64]bool{}
	for _, slot := range produced {
		has[slot] = true
	}
	var skipped uint64
	for slot := start; slot <= end && skipped == 0; slot++ {
		if !has[slot] && has[slot+1] && slot > start {
			skipped = slot
		}
	}
	require.NotZero(t, skipped)
	_, err = c.GetBlockWithOpts(ctx, skipped, &rpc.GetBlockOpts{Commitment: rpc.CommitmentConfirmed})
	require.Equal(t, -32007, solanaRPCError(t, err).Code)
	next, err := c.GetBlockWithOpts(ctx, skipped+1, &rpc.GetBlockOpts{Commitment: rpc.CommitmentConfirmed, TransactionDetails: rpc.TransactionDetailsNone})
	require.NoError(t, err)
	require.Less(t, next.ParentSlot, skipped)
	require.True(t, has[next.ParentSlot])

	st, err := c.GetSignatureStatuses(ctx, true, sig)
	require.NoError(t, err)
	slot := st.Value[0].Slot
	require.True(t, has[slot], "the transaction's slot has its block")
	var block struct {
		Transactions []struct {
			Transaction struct {
				Signatures  []string `json:"signatures"`
				AccountKeys []struct {
					Pubkey   string `json:"pubkey"`
					Writable bool   `json:"writable"`
					Signer   bool   `json:"signer"`
					Source   string `json:"source"`
				} `json:"accountKeys"`
			} `json:"transaction"`
			Meta struct {
				Err               any                `json:"err"`
				PostTokenBalances []rpc.TokenBalance `json:"postTokenBalances"`
				LogMessages       []string           `json:"logMessages"`
			} `json:"meta"`
		} `json:"transactions"`
		Rewards []any `json:"rewards"`
	}
	require.NoError(t, c.RPCCallForInto(ctx, &block, "getBlock", []any{slot, rpc.M{
		"encoding": "jsonParsed", "transactionDetails": "accounts", "rewards": false,
		"commitment": "confirmed", "maxSupportedTransactionVersion": 0,
	}}))
	require.Nil(t, block.Rewards)
	require.Len(t, block.Transactions, 1)
	tx := block.Transactions[0]
	require.Equal(t, sig.String(), tx.Transaction.Signatures[0])
	require.Nil(t, tx.Meta.Err)
	require.Nil(t, tx.Meta.LogMessages, "accounts details leave logs out")
	require.Equal(t, "transaction", tx.Transaction.AccountKeys[0].Source)
	ata, _, err := solana.FindAssociatedTokenAddress(owner, s.Mint)
	require.NoError(t, err)
	found := false
	for _, b := range tx.Meta.PostTokenBalances {
		if b.Owner != nil && b.Owner.Equals(owner) {
			found = true
			require.Equal(t, ata.String(), tx.Transaction.AccountKeys[b.AccountIndex].Pubkey)
			require.Equal(t, "42", b.UiTokenAmount.Amount)
		}
	}
	require.True(t, found, "the owner's balance in postTokenBalances")
}
