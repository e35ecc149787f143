package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/gagliardetto/solana-go"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/refund"
	"agentpay/internal/testenv"
)

// TestRefundJobSendsFromTreasury: a refund recorded by the API is sent by
// the worker's send_refund job out of the treasury, on an EVM chain and on
// Solana (where the payer's token account is made by the treasury), and
// completes with refund.completed.
func TestRefundJobSendsFromTreasury(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}, Jobs: true, BlockTime: 100 * time.Millisecond})
	h := newHarness(t, env, agentpay.Config{})
	h.runWorker(t)
	m, _ := h.merchant(t, "http://127.0.0.1:9/hook")
	auth := &agentpay.MerchantAuth{Merchant: m, Mode: agentpay.ModeTest}

	evmKey, err := crypto.GenerateKey()
	require.NoError(t, err)
	solKey, err := solana.NewRandomPrivateKey()
	require.NoError(t, err)
	payers := map[chains.Name]string{
		chains.Base:   crypto.PubkeyToAddress(evmKey.PublicKey).Hex(),
		chains.Solana: solKey.PublicKey().String(),
	}
	for chain, payer := range payers {
		env.Fund(t, chain, env.Treasury.Address(chain), 50_000_000)
		// A late payment, held for refund: recorded as the scan records
		// one (the refund does not touch the deposit address).
		amount := decimal.RequireFromString("5")
		created, err := h.svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		require.NoError(t, err)
		sess := created.Session
		h.db.Ent.CheckoutSession.UpdateOne(sess).SetStatus(checkoutsession.StatusExpired).ExecX(ctx)
		h.db.Ent.Payment.Create().
			SetSessionID(sess.ID).
			SetExternalID("pay_" + strings.ReplaceAll(uuid.NewString(), "-", "")).
			SetChain(string(chain)).
			SetTxHash("tx-" + uuid.NewString()).
			SetLogIndex(0).
			SetFromAddress(payer).
			SetToAddress("deposit").
			SetAmountToken(5_000_000).
			SetAmountUsd(amount).
			SetBlockNumber(1).
			SetStatus("confirmed").
			SetLate(true).
			ExecX(ctx)

		out, err := h.svc.CreateRefund(ctx, auth, sess.ExternalID, agentpay.RefundInput{AmountUSD: ptrDecimal("3.5")})
		require.NoError(t, err, chain)
		require.Eventually(t, func() bool {
			r := h.db.Ent.Refund.GetX(ctx, out.Refund.ID)
			return r.Status == refund.StatusCompleted
		}, time.Minute, 100*time.Millisecond, "refund on %s", chain)
		require.Equal(t, int64(3_500_000), env.Balance(t, chain, payer).Int64(), chain)
		require.Equal(t, int64(50_000_000-3_500_000), env.Balance(t, chain, env.Treasury.Address(chain)).Int64(), chain)
	}
}

func ptrDecimal(s string) *decimal.Decimal {
	d := decimal.RequireFromString(s)
	return &d
}
