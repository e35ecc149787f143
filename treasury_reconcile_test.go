package agentpay

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
)

// recordInFlight writes a send's pending row exactly as Send does before it
// broadcasts, as if the process then died; age back-dates it.
func (e *sendEnv) recordInFlight(t *testing.T, from, to *ent.Agent, c chains.Name, units int64, age time.Duration) *ent.Transfer {
	t.Helper()
	at := time.Now().UTC().Add(-age)
	fee := TransferFee(units)
	tr, err := e.db.Ent.Transfer.Create().SetKind(transfer.KindSend).
		SetFromAgentID(from.ID).SetToAgentID(to.ID).SetChain(string(c)).
		SetFromAddress(e.wallet(t, from, c)).SetToAddress(e.wallet(t, to, c)).
		SetAmount(units).SetFee(fee).SetNet(units - fee).
		SetRef(randomRef(t)).SetFeeRef(randomRef(t)).
		SetCreatedAt(at).SetUpdatedAt(at).
		Save(context.Background())
	require.NoError(t, err)
	return tr
}

// broadcastLegs sends both legs of a recorded transfer as Send would, and
// records nothing: the crash came right after the broadcast.
func (e *sendEnv) broadcastLegs(t *testing.T, tr *ent.Transfer) {
	t.Helper()
	ctx := context.Background()
	legs, err := e.svc.legs(tr)
	require.NoError(t, err)
	key, err := e.svc.senderKey(ctx, tr)
	require.NoError(t, err)
	for _, leg := range legs {
		_, err := e.ledger(chains.Name(tr.Chain)).Transfer(ctx, chains.TransferRequest{Key: key, To: leg.to, Amount: big.NewInt(leg.amount), Ref: leg.ref})
		require.NoError(t, err)
	}
}

// reconcileUntilDone runs the reconciler until the transfer leaves flight.
func (e *sendEnv) reconcileUntilDone(t *testing.T, tr *ent.Transfer, opts reconcileOptions) *ent.Transfer {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.svc.reconcileTransfersWith(ctx, opts)
		require.NoError(t, err)
		got, err := e.db.Ent.Transfer.Get(ctx, tr.ID)
		require.NoError(t, err)
		if got.Status == transfer.StatusCompleted || got.Status == transfer.StatusFailed {
			return got
		}
		require.True(t, time.Now().Before(deadline), "transfer still %s", got.Status)
		time.Sleep(100 * time.Millisecond)
	}
}

// A send recorded but never broadcast (crash right after recording), and
// one broadcast but never recorded (crash right after broadcast): each is
// finished by the reconciler with exactly one payment of each leg.
func TestReconcileResumesCrashedSends(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		for _, crash := range []string{"after recording", "after broadcast"} {
			t.Run(string(c)+" "+crash, func(t *testing.T) {
				alice, bob := e.register(t, "alice"), e.register(t, "bob")
				e.fund(t, alice, c, "20")
				treasuryBefore := e.onChain(t, c, e.treasuryAddress(c))

				var tr *ent.Transfer
				if crash == "after recording" {
					// Long enough ago that any blockhash it could have
					// used has expired.
					tr = e.recordInFlight(t, alice, bob, c, 10_000_000, 5*time.Minute)
				} else {
					// Just now: on Solana the reconciler must find it by
					// its reference, never send it again.
					tr = e.recordInFlight(t, alice, bob, c, 10_000_000, 0)
					e.broadcastLegs(t, tr)
				}

				done := e.reconcileUntilDone(t, tr, reconcileOptions{MinAge: -1})
				require.Equal(t, transfer.StatusCompleted, done.Status, done.Error)
				require.NotEmpty(t, done.TxHash)
				require.NotEmpty(t, done.FeeTxHash)
				require.NotNil(t, done.CompletedAt)

				requireDecimal(t, "10", e.onChain(t, c, e.wallet(t, alice, c)), "sender")
				requireDecimal(t, "9.99", e.onChain(t, c, e.wallet(t, bob, c)), "recipient")
				requireDecimal(t, "0.01", e.onChain(t, c, e.treasuryAddress(c)).Sub(treasuryBefore), "treasury")
				require.EqualValues(t, 1, e.agent(t, alice).TxCount)
				require.EqualValues(t, 10_000_000, e.agent(t, alice).VolumeSent)
				require.EqualValues(t, 9_990_000, e.agent(t, bob).VolumeReceived)

				// Running again changes nothing.
				st, err := e.svc.reconcileTransfersWith(ctx, reconcileOptions{MinAge: -1})
				require.NoError(t, err)
				require.Zero(t, st.Checked)
				time.Sleep(200 * time.Millisecond)
				requireDecimal(t, "9.99", e.onChain(t, c, e.wallet(t, bob, c)), "recipient")
				require.EqualValues(t, 1, e.agent(t, alice).TxCount)
			})
		}
	}
}

// A Solana leg that may have been broadcast moments ago is not sent again
// until its blockhash must have expired, however long nothing lands.
func TestReconcileSolanaWaitsForBlockhashExpiry(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Solana, "5")
	tr := e.recordInFlight(t, alice, bob, chains.Solana, 1_000_000, 0)

	for i := 0; i < 3; i++ {
		st, err := e.svc.reconcileTransfersWith(ctx, reconcileOptions{MinAge: -1})
		require.NoError(t, err)
		require.Equal(t, 1, st.Waiting)
	}
	got, err := e.db.Ent.Transfer.Get(ctx, tr.ID)
	require.NoError(t, err)
	require.Equal(t, transfer.StatusPending, got.Status)
	require.Empty(t, got.TxHash)
	requireDecimal(t, "0", e.onChain(t, chains.Solana, e.wallet(t, bob, chains.Solana)))

	// Once the window has passed (here: set to nothing) it is sent.
	done := e.reconcileUntilDone(t, tr, reconcileOptions{MinAge: -1, SolanaResendAfter: -1})
	require.Equal(t, transfer.StatusCompleted, done.Status)
	requireDecimal(t, "0.999", e.onChain(t, chains.Solana, e.wallet(t, bob, chains.Solana)))
}

// A send whose inclusion outlasts the request is answered pending and
// completed by the reconciler, counted once.
func TestSendAnsweredPendingThenReconciled(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			alice, bob := e.register(t, "alice"), e.register(t, "bob")
			e.fund(t, alice, c, "50")
			res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("50"), Chain: string(c), Wait: time.Nanosecond})
			require.NoError(t, err)
			require.Equal(t, "pending", res.Status)
			require.NotEmpty(t, res.TxHash)
			require.Contains(t, res.Message, "pending")
			require.Contains(t, res.Message, "49.95 USDC will be delivered")

			// In flight, its amount is not available to another send.
			_, _, err = e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: string(c)})
			require.ErrorIs(t, err, ErrInsufficientFunds)

			done := e.reconcileUntilDone(t, res.Transfer, reconcileOptions{MinAge: -1})
			require.Equal(t, transfer.StatusCompleted, done.Status)
			require.Equal(t, res.TxHash, done.TxHash)
			requireDecimal(t, "49.95", e.onChain(t, c, e.wallet(t, bob, c)))
			requireDecimal(t, "0", e.onChain(t, c, e.wallet(t, alice, c)))
			require.EqualValues(t, 1, e.agent(t, alice).TxCount)
			require.EqualValues(t, 50_000, e.agent(t, alice).FeesPaid)
		})
	}
}

// A fee leg the chain refuses after the recipient was paid (the sender's
// wallet held the net but not the fee) does not fail the send: the
// recipient has its money, so the transfer stays in flight with the reason,
// and the reconciler collects the fee once it can, then completes it.
func TestReconcileRetriesAFeeLegRefusedAfterThePayment(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			alice, bob := e.register(t, "alice"), e.register(t, "bob")
			e.fund(t, alice, c, "9.99")
			treasuryBefore := e.onChain(t, c, e.treasuryAddress(c))
			tr := e.recordInFlight(t, alice, bob, c, 10_000_000, 5*time.Minute)

			// The payment goes out; the fee is refused for lack of USDC.
			opts := reconcileOptions{MinAge: -1, SolanaResendAfter: -1}
			var got *ent.Transfer
			for deadline := time.Now().Add(30 * time.Second); ; {
				_, err := e.svc.reconcileTransfersWith(ctx, opts)
				require.NoError(t, err)
				got, err = e.db.Ent.Transfer.Get(ctx, tr.ID)
				require.NoError(t, err)
				require.NotEqual(t, transfer.StatusFailed, got.Status, "the recipient was paid: %s", got.Error)
				if got.Error != "" && e.onChain(t, c, e.wallet(t, bob, c)).Equal(dec("9.99")) {
					break
				}
				require.True(t, time.Now().Before(deadline), "payment not made, or fee not refused: %+v", got)
				time.Sleep(100 * time.Millisecond)
			}
			require.Regexp(t, "^fee (refused|failed)", got.Error)
			require.NotEmpty(t, got.TxHash)
			require.Empty(t, got.FeeTxHash)
			// Runs meanwhile keep it in flight, never fail it.
			for range 3 {
				_, err := e.svc.reconcileTransfersWith(ctx, opts)
				require.NoError(t, err)
			}
			got, err := e.db.Ent.Transfer.Get(ctx, tr.ID)
			require.NoError(t, err)
			require.Contains(t, []transfer.Status{transfer.StatusPending, transfer.StatusSubmitted}, got.Status)

			e.requireFeeCollected(t, c, alice, bob, tr, treasuryBefore)
			require.EqualValues(t, 10_000_000, e.agent(t, alice).VolumeSent)
		})
	}
}

// requireFeeCollected pays alice the 0.01 fee she lacked for tr (a send of
// 10 to bob whose payment went out) and runs the reconciler until tr
// completes: alice is empty, bob has the net, the treasury the fee.
func (e *sendEnv) requireFeeCollected(t *testing.T, c chains.Name, alice, bob *ent.Agent, tr *ent.Transfer, treasuryBefore decimal.Decimal) {
	t.Helper()
	e.fund(t, alice, c, "0.01")
	done := e.reconcileUntilDone(t, tr, reconcileOptions{MinAge: -1, SolanaResendAfter: -1})
	require.Equal(t, transfer.StatusCompleted, done.Status, done.Error)
	require.Empty(t, done.Error)
	requireDecimal(t, "0", e.onChain(t, c, e.wallet(t, alice, c)), "sender")
	requireDecimal(t, "9.99", e.onChain(t, c, e.wallet(t, bob, c)), "recipient")
	requireDecimal(t, "0.01", e.onChain(t, c, e.treasuryAddress(c)).Sub(treasuryBefore), "treasury")
}

// The same refusal met by the send itself (the sender's balance dropped
// between the balance check and the broadcast): the send answers the
// transfer in flight with the reason instead of failing it, and the
// reconciler collects the fee once it can.
func TestSendKeepsAFeeLegRefusedAfterThePaymentInFlight(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			alice, bob := e.register(t, "alice"), e.register(t, "bob")
			e.fund(t, alice, c, "9.99")
			treasuryBefore := e.onChain(t, c, e.treasuryAddress(c))
			tr := e.recordInFlight(t, alice, bob, c, 10_000_000, 0)

			got, err := e.svc.startTransfer(ctx, tr, 30*time.Second)
			require.NoError(t, err, "the recipient was paid: the send cannot fail")
			require.Contains(t, []transfer.Status{transfer.StatusPending, transfer.StatusSubmitted}, got.Status)
			require.Regexp(t, "^fee (refused|failed)", got.Error)
			require.NotEmpty(t, got.TxHash)
			require.Empty(t, got.FeeTxHash, "a refused or reverted fee leg is sent again")
			stored, err := e.db.Ent.Transfer.Get(ctx, tr.ID)
			require.NoError(t, err)
			require.Equal(t, got.Status, stored.Status)
			require.Equal(t, got.Error, stored.Error)
			for deadline := time.Now().Add(60 * time.Second); !e.onChain(t, c, e.wallet(t, bob, c)).Equal(dec("9.99")); {
				require.True(t, time.Now().Before(deadline), "the payment leg never landed")
				time.Sleep(100 * time.Millisecond)
			}
			e.requireFeeCollected(t, c, alice, bob, tr, treasuryBefore)
		})
	}
}
