package agentpay

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	ethcommon "github.com/ethereum/go-ethereum/common"
	solanago "github.com/gagliardetto/solana-go"
	"github.com/stretchr/testify/require"

	"agentpay/cardissuer/sandbox"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/funding"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
	"agentpay/ent/transfer"
	"agentpay/internal/testenv"
)

// nextBaseBlock seals a block on the base devnet and waits for it: geth
// makes a block's receipts readable a moment before its state is
// "latest", so a balance read right after a completed transfer could miss
// it. (Sealed here: some fixtures' devnets make blocks only when told.)
func nextBaseBlock(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	client := env.EVM(chains.Base).Client()
	head, err := client.BlockNumber(ctx)
	require.NoError(t, err)
	env.EVM(chains.Base).Commit()
	require.Eventually(t, func() bool {
		n, err := client.BlockNumber(ctx)
		return err == nil && n > head
	}, 30*time.Second, 5*time.Millisecond, "base stopped making blocks")
}

// requireBalanced reads the books and requires every line equal.
func requireBalanced(t *testing.T, env *testenv.Env, svc *Service) *Books {
	t.Helper()
	nextBaseBlock(t, env)
	b, err := svc.Books(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.Err())
	for _, c := range b.Chains {
		for _, l := range c.Lines {
			require.Zero(t, l.OnChain.Cmp(l.Records), "%s %s %s", c.Chain, c.Mode, l.Holder)
			require.Empty(t, l.Differences)
		}
	}
	return b
}

func booksLine(t *testing.T, b *Books, chain chains.Name, mode Mode, h BooksHolder) BooksLine {
	t.Helper()
	for _, c := range b.Chains {
		if c.Chain == chain && c.Mode == mode {
			for _, l := range c.Lines {
				if l.Holder == h {
					return l
				}
			}
		}
	}
	t.Fatalf("no %s %s %s line", chain, mode, h)
	return BooksLine{}
}

// The books balance to the base unit after every step of the money's
// flow: payments into deposit addresses, their sweeps, a batch's payout,
// a refund after it, the next batch netting it; and agents' sends, a send
// to a human and a human's withdrawal, on base and Solana.
func TestBooksBalanced(t *testing.T) {
	t.Run("settlements", func(t *testing.T) {
		ctx := context.Background()
		f := newSettlementFixture(t, nil)
		treasury := f.svc.cfg.Treasury.EVMAddress
		// The treasury's liquidity, recorded by the faucet that paid it.
		f.env.Fund(t, chains.Base, treasury, 100_000_000)
		b := requireBalanced(t, f.env, f.svc)
		deposits := booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses)
		require.Zero(t, deposits.OnChain.Cmp(big.NewInt(7_250_000)), "the unswept payment is on its address")

		require.True(t, f.settle(t).Done)
		b = requireBalanced(t, f.env, f.svc)
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).OnChain.Sign(), "swept")
		// 100 + 7.25 swept - 7.24275 paid out.
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).Records.Cmp(big.NewInt(100_007_250)))

		// A refund after the payout, paid from the merchant's next payment,
		// unsettled.
		next := f.paidPayment(t, "12", 12_000_000)
		requireBalanced(t, f.env, f.svc)
		auth := &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}
		out, err := f.svc.CreateRefund(ctx, auth, f.sess.ExternalID, RefundInput{PaymentID: f.payment.ExternalID, AmountUSD: usdAmount("2.5")})
		require.NoError(t, err)
		requireBalanced(t, f.env, f.svc) // pending: nothing moved yet
		f.svc.cfg.Settlement.Wait = 10 * time.Second
		res, err := f.svc.SendRefund(ctx, out.Refund.ID)
		require.NoError(t, err)
		require.True(t, res.Done, res.Waiting)
		requireBalanced(t, f.env, f.svc)

		// The faucet paying a checkout records a funding, but what reaches
		// a deposit address is a payment: counted once.
		f.stopMine()
		sess, addr := f.open(t, "3")
		f.env.Fund(t, chains.Base, addr.Hex(), 3_000_000)
		f.scan(t)
		f.mine(t, func() bool { return f.reload(t, sess).Status == checkoutsession.StatusConfirmed })
		f.stopMine = autoMine(t, f.evm)
		b = requireBalanced(t, f.env, f.svc)
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).OnChain.Cmp(big.NewInt(12_000_000+3_000_000)))
		require.True(t, f.settleWith(t, next, atOnce).Done)
		b = requireBalanced(t, f.env, f.svc)
		// 100 + both fees: the refund came out of the next batch.
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(100_000_000+7_250+12_000)))
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).OnChain.Cmp(big.NewInt(3_000_000)), "the faucet's payment, not swept yet")
	})

	t.Run("sends", func(t *testing.T) {
		ctx := context.Background()
		e := startSendEnv(t)
		alice, bob := e.register(t, "alice"), e.register(t, "bob")
		w := e.withdrawer(t)
		for _, c := range []chains.Name{chains.Base, chains.Solana} {
			e.fund(t, alice, c, "100")
			e.fundUser(t, w, c, "20")
		}
		requireBalanced(t, e.env, e.svc)
		for _, c := range []chains.Name{chains.Base, chains.Solana} {
			res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("10"), Chain: string(c)})
			require.NoError(t, err)
			require.Equal(t, "completed", res.Status)
			wd, _, err := e.svc.Withdraw(ctx, w.v, confirmed(t, e.db, w.u, WithdrawRequest{ToAddress: e.externalAddress(t, c), AmountUSD: dec("5"), Chain: string(c)}))
			require.NoError(t, err)
			require.Equal(t, "completed", wd.Status)
		}
		b := requireBalanced(t, e.env, e.svc)
		for _, c := range []chains.Name{chains.Base, chains.Solana} {
			// 100 funded, 10 sent; bob's 9.99.
			require.Zero(t, booksLine(t, b, c, ModeTest, BooksAgentWallets).OnChain.Cmp(big.NewInt(100_000_000-10_000_000+9_990_000)), c)
			// 20 funded, 5 withdrawn.
			require.Zero(t, booksLine(t, b, c, ModeTest, BooksHumanWallets).OnChain.Cmp(big.NewInt(15_000_000)), c)
			// The fees of the send and the withdrawal.
			require.Zero(t, booksLine(t, b, c, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(10_000+5_000)), c)
		}
	})
}

// The books balance through a card purchase (the reservation into the
// treasury, the charge, the return of what was left) and an agent's
// payment of a checkout session (a transfer and the session's payment,
// detected, then confirmed and settled).
func TestBooksBalancedCardsAndAgentCheckout(t *testing.T) {
	t.Run("cards", func(t *testing.T) {
		ctx := context.Background()
		e := startCardEnv(t)
		a, u := e.pairedAgent(t, "10", true)
		v := e.request(t, a, "4.00")
		got, err := e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, v.Request.ID.String(), "", nil)
		require.NoError(t, err)
		require.Equal(t, CardApproved, got.Status())
		b := requireBalanced(t, e.env, e.svc)
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(4_000_000)), "the reservation")

		first, err := e.svc.AgentCardRequest(ctx, a, v.Request.ID.String())
		require.NoError(t, err)
		d := first.Details
		ref, decline := e.issuer.Find(sandbox.Presented{Number: d.Number, ExpMonth: d.ExpMonth, ExpYear: d.ExpYear, CVC: d.CVC}, e.clock.Now())
		require.Empty(t, decline)
		c, err := e.svc.AuthorizeCardCharge(ctx, sandbox.Name, ref, dec("2.50"), "Acme Books")
		require.NoError(t, err)
		require.True(t, c.Approved, c.Reason)
		require.NotNil(t, e.card(t, got.Request).RefundedAt)
		b = requireBalanced(t, e.env, e.svc)
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(2_500_000)), "what was charged")
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksAgentWallets).OnChain.Cmp(big.NewInt(7_500_000)))
	})

	t.Run("agent checkout", func(t *testing.T) {
		ctx := context.Background()
		e := startAgentCheckoutEnv(t)
		e.merchant = e.db.Ent.Merchant.UpdateOne(e.merchant).SetSettlementAddress(e.externalAddress(t, chains.Base)).SaveX(ctx)
		a := e.register(t, "buyer")
		e.fund(t, a, chains.Base, "20")
		sess := e.session(t, "12.34", false)
		res, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
		require.NoError(t, err)
		require.Equal(t, "detected", res.Status)
		b := requireBalanced(t, e.env, e.svc)
		deposits := booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses)
		require.Zero(t, deposits.OnChain.Cmp(big.NewInt(12_340_000)))
		require.Len(t, deposits.InFlight, 1, "a detected payment is named while a reorg may drop it")
		require.Equal(t, "payment", deposits.InFlight[0].Kind)

		e.scanUntil(t, func() bool { return e.reloadSession(t, sess).Status == checkoutsession.StatusConfirmed })
		p := e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).OnlyX(ctx)
		res2, err := e.svc.settlePaymentWith(ctx, p.ID, atOnce)
		require.NoError(t, err)
		require.True(t, res2.Done, res2.Waiting)
		b = requireBalanced(t, e.env, e.svc)
		require.Empty(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).InFlight)
		// The settlement fee of 12.34.
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(12_340)))
	})
}

// The books balance through a held (late) payment, its sweep and its
// refund, and through a payment on Solana swept to the treasury (its
// emptied token account closed).
func TestBooksBalancedHeldAndSolana(t *testing.T) {
	t.Run("held payment", func(t *testing.T) {
		ctx := context.Background()
		f, late := latePaymentFixture(t)
		f.env.Fund(t, chains.Base, f.svc.cfg.Treasury.EVMAddress, 10_000_000)
		b := requireBalanced(t, f.env, f.svc)
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).OnChain.Cmp(big.NewInt(1_000_000)), "held, not swept yet")
		require.True(t, f.sweepHeld(t, late).Done)
		requireBalanced(t, f.env, f.svc)
		auth := &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}
		out, err := f.svc.CreateRefund(ctx, auth, f.sess.ExternalID, RefundInput{PaymentID: late.ExternalID})
		require.NoError(t, err)
		f.svc.cfg.Settlement.Wait = 10 * time.Second
		res, err := f.svc.SendRefund(ctx, out.Refund.ID)
		require.NoError(t, err)
		require.True(t, res.Done, res.Waiting)
		b = requireBalanced(t, f.env, f.svc)
		// 10 + 7.25 swept - 7.24275 paid out + 1 swept - 1 refunded.
		require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(10_007_250)))
	})

	t.Run("solana", func(t *testing.T) {
		ctx := context.Background()
		f := newCheckoutFixture(t, true)
		reg := f.merchant(t, "Shop", nil)
		sess := f.session(t, reg.Merchant, "3")
		_, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Solana)
		require.NoError(t, err)
		d, err := f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "solana", "USDC")
		require.NoError(t, err)
		_, err = f.sol.Send(ctx, solanago.MustPublicKeyFromBase58(d.Address), 3_000_000)
		require.NoError(t, err)
		var p *ent.Payment
		require.Eventually(t, func() bool {
			_, err := f.svc.ScanDeposits(ctx, ModeTest, chains.Solana)
			require.NoError(t, err)
			p, err = f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Only(ctx)
			return err == nil && p.Status == payment.StatusConfirmed
		}, 30*time.Second, 100*time.Millisecond)
		f.env.Fund(t, chains.Solana, f.svc.cfg.Treasury.Address(chains.Solana), 1) // its token account
		b := requireBalanced(t, f.env, f.svc)
		require.Zero(t, booksLine(t, b, chains.Solana, ModeTest, BooksDepositAddresses).OnChain.Cmp(big.NewInt(3_000_000)))

		// No settlement address: the settlement sweeps, then waits for one.
		_, err = f.svc.settlePaymentWith(ctx, p.ID, SettlementOptions{Wait: 20 * time.Second})
		require.NoError(t, err)
		require.NotNil(t, f.db.Ent.Payment.GetX(ctx, p.ID).SweptAt)
		b = requireBalanced(t, f.env, f.svc)
		require.Zero(t, booksLine(t, b, chains.Solana, ModeTest, BooksDepositAddresses).OnChain.Sign(), "swept, its account closed")
		require.Zero(t, booksLine(t, b, chains.Solana, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(3_000_001)))
	})
}

// USDC that reaches a holder outside every record is a difference naming
// the address and no record; a record altered in the database (a
// completed refund marked failed) is one naming that record. Holders are
// checked in order (treasury first), so Err names the first.
func TestBooksNamesTheFirstDifference(t *testing.T) {
	t.Run("outside payment and altered record", booksOutsideAndAltered)
	t.Run("in flight", booksInFlight)
}

func booksOutsideAndAltered(t *testing.T) {
	ctx := context.Background()
	f := newSettlementFixture(t, nil)
	f.env.Fund(t, chains.Base, f.svc.cfg.Treasury.EVMAddress, 100_000_000)
	auth := &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}
	out, err := f.svc.CreateRefund(ctx, auth, f.sess.ExternalID, RefundInput{AmountUSD: usdAmount("2.5")})
	require.NoError(t, err)
	f.svc.cfg.Settlement.Wait = 10 * time.Second
	res, err := f.svc.SendRefund(ctx, out.Refund.ID)
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	require.True(t, f.settle(t).Done)
	requireBalanced(t, f.env, f.svc)

	// Paid to the swept deposit address, unseen by any scan. It is a
	// payment, never an operator's funding.
	stray, err := f.evm.Send(ctx, f.deposit, big.NewInt(1_000_000))
	require.NoError(t, err)
	_, err = f.svc.RecordFundingTx(ctx, ModeTest, chains.Base, f.deposit.Hex(), stray.Hex())
	require.ErrorContains(t, err, "is a deposit address")
	nextBaseBlock(t, f.env)
	b, err := f.svc.Books(ctx)
	require.NoError(t, err)
	require.Error(t, b.Err())
	msg := b.Err().Error()
	require.Contains(t, msg, "base test: deposit address "+f.deposit.Hex())
	require.Contains(t, msg, "holds 1000000 more than recorded")
	require.Contains(t, msg, "no record explains it")
	require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).Difference().Cmp(big.NewInt(1_000_000)))
	require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).Difference().Sign())

	// The refund's record says it failed; the chain paid it.
	f.db.Ent.Refund.UpdateOneID(out.Refund.ID).SetStatus(refund.StatusFailed).ExecX(ctx)
	b, err = f.svc.Books(ctx)
	require.NoError(t, err)
	msg = b.Err().Error()
	require.True(t, strings.HasPrefix(msg, "books: base test: treasury "+f.svc.cfg.Treasury.EVMAddress), msg)
	require.Contains(t, msg, "holds 2500000 less than recorded")
	require.Contains(t, msg, "refund "+out.Refund.ID.String()+" (2500000, failed)")
	require.Len(t, booksLine(t, b, chains.Base, ModeTest, BooksDepositAddresses).Differences, 1, "the deposit address's difference is still listed")
}

// A send broadcast but not yet recorded (the process died right after):
// the chain has moved what the records do not say yet; the books name the
// transfer in flight, and balance once the reconciler has finished it.
func booksInFlight(t *testing.T) {
	e := startSendEnv(t)
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			ctx := context.Background()
			alice, bob := e.register(t, "alice"), e.register(t, "bob")
			e.fund(t, alice, c, "20")
			requireBalanced(t, e.env, e.svc)

			tr := e.recordInFlight(t, alice, bob, c, 10_000_000, 0)
			e.broadcastLegs(t, tr)
			require.Eventually(t, func() bool {
				return e.onChain(t, c, e.wallet(t, bob, c)).Equal(dec("9.99")) && e.onChain(t, c, e.wallet(t, alice, c)).Equal(dec("10"))
			}, 30*time.Second, 50*time.Millisecond)
			nextBaseBlock(t, e.env)
			b, err := e.svc.Books(ctx)
			require.NoError(t, err)
			require.Error(t, b.Err())
			msg := b.Err().Error()
			require.Contains(t, msg, "books: "+string(c)+" test: treasury ")
			require.Contains(t, msg, "holds 10000 more than recorded")
			require.Contains(t, msg, "in flight: transfer "+tr.ID.String()+" (10000000, pending)")
			wallets := booksLine(t, b, c, ModeTest, BooksAgentWallets)
			require.Len(t, wallets.Differences, 2, "sender and recipient")
			for _, d := range wallets.Differences {
				require.Equal(t, tr.ID.String(), d.Explained.ID)
				require.True(t, d.Explained.InFlight)
			}

			done := e.reconcileUntilDone(t, tr, reconcileOptions{MinAge: -1})
			require.Equal(t, transfer.StatusCompleted, done.Status, done.Error)
			requireBalanced(t, e.env, e.svc)
		})
	}
}

// downLedger is a ledger whose node does not answer balance reads.
type downLedger struct{ chains.Ledger }

func (downLedger) Balance(context.Context, string) (*big.Int, error) {
	return nil, errors.New("dial tcp 127.0.0.1:8545: connection refused")
}

// A chain that cannot be read makes the books unavailable, naming what
// could not be read (never the node's error): no answer is better than
// one that is silently short.
func TestBooksUnavailableWhenAChainIsDown(t *testing.T) {
	e := startSendEnv(t)
	svc := e.withBaseLedger(t, downLedger{e.ledger(chains.Base)})
	_, err := svc.Books(context.Background())
	require.ErrorIs(t, err, ErrUnavailable)
	require.Contains(t, err.Error(), "base test: ")
	require.Contains(t, err.Error(), "cannot read the balance of treasury "+e.treasuryAddress(chains.Base))
	require.NotContains(t, err.Error(), "8545")
}

// The deposit scan watches the treasury and the custodial wallets too: USDC
// they receive from outside is a difference until the scan sees it final,
// then a funding (source inbound) and balanced. Transfers among the
// service's own addresses (a send, its fee leg) are never fundings, and a
// payment the faucet already recorded is recorded once.
func TestBooksRecordsInboundFunding(t *testing.T) {
	e := startSendEnv(t)
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			ctx := context.Background()
			scan := func() {
				_, err := e.svc.ScanDeposits(ctx, ModeTest, c)
				require.NoError(t, err)
			}
			scan() // the scan's cursor starts at the head
			alice, bob := e.register(t, "alice"), e.register(t, "bob")
			aliceWallet := e.wallet(t, alice, c)
			e.fund(t, alice, c, "20") // recorded by the faucet

			// payFromOutside sends units to alice's wallet from the devnet's
			// payer, which the service does not hold.
			payFromOutside := func(units int64) string {
				if c == chains.Solana {
					sig, err := e.env.Solana().Send(ctx, solanago.MustPublicKeyFromBase58(aliceWallet), uint64(units))
					require.NoError(t, err)
					return sig.String()
				}
				h, err := e.env.EVM(c).Send(ctx, ethcommon.HexToAddress(aliceWallet), big.NewInt(units))
				require.NoError(t, err)
				return h.Hex()
			}
			recorded := func(tx string) bool {
				n, err := e.db.Ent.Funding.Query().Where(funding.Chain(string(c)), funding.TxHash(tx)).Count(ctx)
				require.NoError(t, err)
				return n == 1
			}

			// 5 USDC reach alice's wallet from outside, unrecorded.
			outside := payFromOutside(5_000_000)
			require.Eventually(t, func() bool { return e.onChain(t, c, aliceWallet).Equal(dec("25")) }, 30*time.Second, 50*time.Millisecond)
			nextBaseBlock(t, e.env)
			b, err := e.svc.Books(ctx)
			require.NoError(t, err)
			require.ErrorContains(t, b.Err(), "agent wallet "+aliceWallet)
			require.ErrorContains(t, b.Err(), "holds 5000000 more than recorded")

			res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("10"), Chain: string(c)})
			require.NoError(t, err)
			require.Equal(t, "completed", res.Status)

			// The scan sees the outside payment final and records it.
			require.Eventually(t, func() bool { scan(); return recorded(outside) }, 60*time.Second, 100*time.Millisecond)
			f := e.db.Ent.Funding.Query().Where(funding.Chain(string(c)), funding.TxHash(outside)).OnlyX(ctx)
			require.Equal(t, int64(5_000_000), f.Amount)
			require.Equal(t, FundingInbound, f.Source)
			require.True(t, sameAddress(c, aliceWallet, f.Address))
			// The send's legs are never fundings: once the scan has recorded
			// an outside payment made after them, it has read their blocks.
			later := payFromOutside(1_000_000)
			require.Eventually(t, func() bool { scan(); return recorded(later) }, 60*time.Second, 100*time.Millisecond)
			for _, h := range []string{res.TxHash, res.FeeTxHash} {
				n, err := e.db.Ent.Funding.Query().Where(funding.Chain(string(c)), funding.TxHash(h)).Count(ctx)
				require.NoError(t, err)
				require.Zero(t, n, "the service's own transfer %s", h)
			}
			// The faucet's payment: its own record, not a second.
			n, err := e.db.Ent.Funding.Query().Where(funding.Chain(string(c)), funding.Address(aliceWallet)).Count(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, n, "the faucet's and the two outside payments")
			requireBalanced(t, e.env, e.svc)
		})
	}
}
