package agentpay

import (
	"context"
	"math/big"
	"testing"
	"time"

	solanago "github.com/gagliardetto/solana-go"
	solanarpc "github.com/gagliardetto/solana-go/rpc"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/payment"
)

// latePaymentFixture is the settlement fixture with its payment settled,
// then a late payment of 1.00 to the same deposit address, confirmed and
// held for refund.
func latePaymentFixture(t *testing.T) (*settlementFixture, *ent.Payment) {
	t.Helper()
	ctx := context.Background()
	f := newSettlementFixture(t, nil)
	require.True(t, f.settle(t).Done)
	f.pay(t, f.deposit, 1_000_000)
	f.finalAll(t)
	late, err := f.db.Ent.Payment.Query().Where(payment.SessionID(f.sess.ID), payment.IDNEQ(f.payment.ID)).Only(ctx)
	require.NoError(t, err)
	require.True(t, late.Late)
	require.Equal(t, payment.StatusConfirmed, late.Status)
	require.Nil(t, late.SettlementStatus, "held")
	da := f.db.Ent.DepositAddress.GetX(ctx, *late.DepositAddressID)
	require.False(t, da.Swept, "a new amount on the address")
	held, err := f.svc.HeldUnswept(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{late.ID}, held)
	return f, late
}

func (f *settlementFixture) sweepHeld(t *testing.T, p *ent.Payment) SettleResult {
	t.Helper()
	res, err := f.svc.sweepHeldWith(context.Background(), p.ID, SettlementOptions{Wait: 10 * time.Second})
	require.NoError(t, err)
	return res
}

// crashedHeldSweep does what a held sweep run that crashed after its
// broadcast did: sweep_submitted_at written, the sweep sent, no hash.
func (f *settlementFixture) crashedHeldSweep(t *testing.T, p *ent.Payment) {
	t.Helper()
	ctx := context.Background()
	f.db.Ent.Payment.UpdateOneID(p.ID).SetSweepSubmittedAt(time.Now().UTC().Truncate(time.Microsecond)).ExecX(ctx)
	da := f.db.Ent.DepositAddress.GetX(ctx, *p.DepositAddressID)
	key, err := f.svc.DepositAddressKey(da)
	require.NoError(t, err)
	sub, err := f.ledger.Transfer(ctx, chains.TransferRequest{Key: key, To: f.svc.cfg.Treasury.EVMAddress,
		Amount: big.NewInt(p.AmountToken), Ref: settlementRef("sweep", p.ID)})
	require.NoError(t, err)
	r, err := f.ledger.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, r.State)
}

// TestHeldPaymentIsSweptOnce: a late payment is swept to the treasury once,
// whether its sweep runs twice, crashes after broadcasting, or is taken over
// by a settlement (same leg, same ref); the address is then swept, with
// the last sweep's hash.
func TestHeldPaymentIsSweptOnce(t *testing.T) {
	const fee = 7_250 // the settled payment's
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, f *settlementFixture, late *ent.Payment)
	}{
		{"twice", func(t *testing.T, f *settlementFixture, late *ent.Payment) {
			require.True(t, f.sweepHeld(t, late).Done)
			require.True(t, f.sweepHeld(t, late).Done)
		}},
		{"crash after broadcast", func(t *testing.T, f *settlementFixture, late *ent.Payment) {
			f.crashedHeldSweep(t, late)
			require.True(t, f.sweepHeld(t, late).Done)
		}},
		{"settlement takes over after a crash", func(t *testing.T, f *settlementFixture, late *ent.Payment) {
			ctx := context.Background()
			f.crashedHeldSweep(t, late)
			// As if the payment were counted now (queueSettlements).
			f.db.Ent.Payment.UpdateOneID(late.ID).SetSettlementStatus(payment.SettlementStatusPending).
				SetSettlementFee(1_000).SetSettlementNet(999_000).ExecX(ctx)
			res, err := f.svc.settlePaymentWith(ctx, late.ID, atOnce)
			require.NoError(t, err)
			require.True(t, res.Done, res.Waiting)
			require.True(t, f.sweepHeld(t, late).Done, "left to its settlement")
			require.Equal(t, int64(7_242_750+999_000), f.balance(t, f.payee.Hex()), "paid once")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f, late := latePaymentFixture(t)
			tc.run(t, f, late)

			require.Zero(t, f.balance(t, f.deposit.Hex()), "deposit swept")
			treasury := f.balance(t, f.svc.cfg.Treasury.EVMAddress)
			if tc.name == "settlement takes over after a crash" {
				require.Equal(t, int64(fee+1_000), treasury)
			} else {
				require.Equal(t, int64(fee+1_000_000), treasury, "swept once")
			}
			p := f.db.Ent.Payment.GetX(ctx, late.ID)
			require.NotEmpty(t, p.SweepTxHash)
			require.NotNil(t, p.SweptAt)
			da := f.db.Ent.DepositAddress.GetX(ctx, *p.DepositAddressID)
			require.True(t, da.Swept)
			require.Equal(t, p.SweepTxHash, da.SweepTxHash, "the last sweep's hash")
			held, err := f.svc.HeldUnswept(ctx, 0, 10)
			require.NoError(t, err)
			require.Empty(t, held)
		})
	}
}

// TestSolanaSweepClosesTokenAccount: once a Solana deposit address is
// swept, its emptied token account is closed and its rent is back with the
// treasury (less the fees of the sweep and the close).
func TestSolanaSweepClosesTokenAccount(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, true)
	reg := f.merchant(t, "Shop", nil)
	sess := f.session(t, reg.Merchant, "3")
	_, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Solana)
	require.NoError(t, err)
	d, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "solana", "USDC")
	require.NoError(t, err)
	owner := solanago.MustPublicKeyFromBase58(d.Address)
	_, err = f.sol.Send(ctx, owner, 3_000_000)
	require.NoError(t, err)
	var p *ent.Payment
	require.Eventually(t, func() bool {
		_, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Solana)
		require.NoError(t, err)
		p, err = f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Only(ctx)
		return err == nil && p.Status == payment.StatusConfirmed
	}, 30*time.Second, 100*time.Millisecond)

	client := f.sol.Client()
	treasury := solanago.MustPublicKeyFromBase58(f.svc.cfg.Treasury.Address(chains.Solana))
	// The treasury's own token account exists (else the sweep pays its rent).
	_, err = f.sol.Send(ctx, treasury, 1)
	require.NoError(t, err)
	before, err := client.GetBalance(ctx, treasury, solanarpc.CommitmentConfirmed)
	require.NoError(t, err)
	// No settlement address: the settlement sweeps, then waits for one.
	_, err = f.svc.settlePaymentWith(ctx, p.ID, SettlementOptions{Wait: 20 * time.Second})
	require.NoError(t, err)
	p = f.db.Ent.Payment.GetX(ctx, p.ID)
	require.NotNil(t, p.SweptAt)
	require.True(t, f.db.Ent.DepositAddress.GetX(ctx, *p.DepositAddressID).Swept)

	ata, _, err := solanago.FindAssociatedTokenAddress(owner, f.sol.Mint)
	require.NoError(t, err)
	_, err = client.GetAccountInfoWithOpts(ctx, ata, &solanarpc.GetAccountInfoOpts{Commitment: solanarpc.CommitmentConfirmed})
	require.ErrorIs(t, err, solanarpc.ErrNotFound, "token account closed")
	after, err := client.GetBalance(ctx, treasury, solanarpc.CommitmentConfirmed)
	require.NoError(t, err)
	const rent = 2_039_280
	gain := int64(after.Value) - int64(before.Value)
	require.LessOrEqual(t, gain, int64(rent))
	require.Greater(t, gain, int64(rent-50_000), "the rent back, less the fees")
}

// TestSweepSubmittedIsCompareAndSet: a run marks the sweep submitted only
// if sweep_submitted_at is still what it read (as stored, on both
// databases), so two runs never broadcast the same sweep at once.
func TestSweepSubmittedIsCompareAndSet(t *testing.T) {
	ctx := context.Background()
	f, late := latePaymentFixture(t)
	mark := func(read *ent.Payment) error {
		u := f.db.Ent.Payment.UpdateOne(read).Where(payment.SettlementStatusIsNil(), sweepSubmittedAtIs(read.SweepSubmittedAt))
		return f.svc.markSweepSubmitted(ctx, read, u)
	}
	stale := f.db.Ent.Payment.GetX(ctx, late.ID)
	first := f.db.Ent.Payment.GetX(ctx, late.ID)
	require.NoError(t, mark(first))
	require.ErrorIs(t, mark(stale), errSweepTaken, "read before the first mark")
	again := f.db.Ent.Payment.GetX(ctx, late.ID)
	require.NotNil(t, again.SweepSubmittedAt)
	time.Sleep(2 * time.Millisecond) // a later sweep_submitted_at
	require.NoError(t, mark(again), "what was read back matches")
	require.ErrorIs(t, mark(first), errSweepTaken)
}
