package agentpay

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	solanago "github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/stepup"
	"agentpay/ent/transfer"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// withdrawer is a signed-in human of a sendEnv, their wallets and a viewer.
type withdrawer struct {
	u       *ent.User
	v       *Viewer
	wallets map[chains.Name]string
}

func (e *sendEnv) withdrawer(t testing.TB) *withdrawer {
	t.Helper()
	ctx := context.Background()
	name := randomName(t, "ann")
	u, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	ws, err := e.svc.UserWallets(ctx, u)
	require.NoError(t, err)
	w := &withdrawer{u: u, v: &Viewer{User: u}, wallets: map[chains.Name]string{}}
	for _, x := range ws {
		w.wallets[chains.Name(x.Chain)] = x.Address
	}
	return w
}

// confirmed is req with a step-up of its user for exactly it, confirmed
// as following its e-mailed link would (TestWithdrawStepUp tests that
// path): the fixture the withdrawals' own tests start from.
func confirmed(t testing.TB, db *store.DB, u *ent.User, req WithdrawRequest) WithdrawRequest {
	t.Helper()
	now := time.Now().UTC()
	up, err := db.Ent.StepUp.Create().SetUserID(u.ID).SetAction(StepUpWithdraw).SetSubject(withdrawalSubject(req)).
		SetMethod(stepup.MethodEmail).SetTokenHash(vault.HashSecret(vault.StepUpToken.New())).
		SetExpiresAt(now.Add(100 * 365 * 24 * time.Hour)).SetConfirmedAt(now).Save(context.Background())
	require.NoError(t, err)
	req.StepUp = StepUpProof{ID: up.ID.String()}
	return req
}

func (e *sendEnv) fundUser(t testing.TB, w *withdrawer, c chains.Name, usdc string) {
	t.Helper()
	e.env.Fund(t, c, w.wallets[c], dec(usdc).Shift(6).IntPart())
}

// externalAddress is a fresh wallet outside the service on chain (on
// Solana it has no token account yet).
func (e *sendEnv) externalAddress(t testing.TB, c chains.Name) string {
	t.Helper()
	_, addr, err := e.svc.wallets(c).NewKey()
	require.NoError(t, err)
	return addr
}

func (e *sendEnv) userEvents(t testing.TB, u *ent.User) []AccountEvent {
	t.Helper()
	evs, err := e.svc.AccountEvents(context.Background(), UserParty(u.ID), 0, nil)
	require.NoError(t, err)
	return evs
}

// Each refusal is refused with its error and changes nothing: no transfer
// recorded, no balance moved, no event.
func TestWithdrawRefusals(t *testing.T) {
	e := startSendEnv(t)
	svc := newTestService(t, e.env, Config{AgentMode: ModeTest, Withdrawals: WithdrawalLimits{
		PerWithdrawal: dec("100"), Daily: dec("200"),
	}})
	ctx := context.Background()
	w := e.withdrawer(t)
	e.fundUser(t, w, chains.Base, "50")
	other := e.withdrawer(t)
	evmTo, solTo := e.externalAddress(t, chains.Base), e.externalAddress(t, chains.Solana)
	// 120 USD already withdrawn today: the daily limit leaves 80.
	_, err := e.db.Ent.Transfer.Create().SetKind(transfer.KindWithdrawal).
		SetFromUserID(other.u.ID).SetChain("base").SetFromAddress(other.wallets[chains.Base]).SetToAddress(evmTo).
		SetAmount(1).SetFee(0).SetNet(1).SetRef(randomRef(t)).SetStatus(transfer.StatusCompleted).Save(ctx)
	require.NoError(t, err, "another user's withdrawals count for them only")
	_, err = e.db.Ent.Transfer.Create().SetKind(transfer.KindWithdrawal).
		SetFromUserID(w.u.ID).SetChain("solana").SetFromAddress(w.wallets[chains.Solana]).SetToAddress(solTo).
		SetAmount(120_000_000).SetFee(120_000).SetNet(119_880_000).
		SetRef(randomRef(t)).SetFeeRef(randomRef(t)).SetStatus(transfer.StatusCompleted).Save(ctx)
	require.NoError(t, err)
	// A row with neither sender, or both, is refused by the database.
	_, err = e.db.Ent.Transfer.Create().SetKind(transfer.KindWithdrawal).SetChain("base").SetFromAddress(evmTo).SetToAddress(evmTo).
		SetAmount(1).SetNet(1).SetRef(randomRef(t)).Save(ctx)
	require.Error(t, err, "a transfer without a sender")

	mixedCase := strings.ToUpper(evmTo[:2]) + evmTo[2:] // 0X... is the same address
	wrongChecksum := flipFirstLetter(evmTo)
	for _, tc := range []struct {
		name   string
		req    WithdrawRequest
		check  func(error) bool
		detail string
	}{
		{"below minimum", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("0.009")}, IsValidation, "at least 0.01"},
		{"zero", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("0")}, IsValidation, "at least 0.01"},
		{"negative", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("-1")}, IsValidation, "at least 0.01"},
		{"seven decimals", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("1.0000001")}, IsValidation, "more than 6 decimal"},
		{"unknown chain", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("1"), Chain: "bitcoin"}, IsValidation, "unknown chain"},
		{"chain without user wallets", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("1"), Chain: "polygon"}, IsValidation, "solana and base only"},
		{"no address", WithdrawRequest{AmountUSD: dec("1")}, IsValidation, "to_address: is required"},
		{"address too long", WithdrawRequest{ToAddress: strings.Repeat("a", 101), AmountUSD: dec("1")}, IsValidation, "at most 100"},
		{"not an address", WithdrawRequest{ToAddress: "hello", AmountUSD: dec("1")}, IsValidation, "neither a Solana nor a Base address"},
		{"short hex", WithdrawRequest{ToAddress: evmTo[:41], AmountUSD: dec("1"), Chain: "base"}, IsValidation, "not a Base address"},
		{"wrong checksum", WithdrawRequest{ToAddress: wrongChecksum, AmountUSD: dec("1")}, IsValidation, "neither a Solana nor a Base address"},
		{"zero address", WithdrawRequest{ToAddress: "0x0000000000000000000000000000000000000000", AmountUSD: dec("1")}, IsValidation, "neither"},
		{"solana address on base", WithdrawRequest{ToAddress: solTo, AmountUSD: dec("1"), Chain: "base"}, IsValidation, "not a Base address"},
		{"base address on solana", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("1"), Chain: "solana"}, IsValidation, "not a Solana address"},
		{"own base wallet", WithdrawRequest{ToAddress: w.wallets[chains.Base], AmountUSD: dec("1")}, IsValidation, "your own base wallet"},
		{"own base wallet lower-cased", WithdrawRequest{ToAddress: strings.ToLower(w.wallets[chains.Base]), AmountUSD: dec("1")}, IsValidation, "your own base wallet"},
		{"own solana wallet", WithdrawRequest{ToAddress: w.wallets[chains.Solana], AmountUSD: dec("1")}, IsValidation, "your own solana wallet"},
		{"treasury on base", WithdrawRequest{ToAddress: strings.ToLower(e.treasuryAddress(chains.Base)), AmountUSD: dec("1")}, IsValidation, "treasury"},
		{"treasury on solana", WithdrawRequest{ToAddress: e.treasuryAddress(chains.Solana), AmountUSD: dec("1")}, IsValidation, "treasury"},
		{"memo too long", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("1"), Memo: string(make([]byte, 501))}, IsValidation, "memo"},
		{"per-withdrawal limit", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("100.01")}, isErr(ErrForbidden), "per-withdrawal limit of 100 USD"},
		{"daily limit", WithdrawRequest{ToAddress: evmTo, AmountUSD: dec("80.01")}, isErr(ErrForbidden), "daily withdrawal limit of 200 USD (120 USD already withdrawn today)"},
		{"insufficient on base", WithdrawRequest{ToAddress: mixedCase, AmountUSD: dec("50.000001"), Chain: "base"}, isErr(ErrInsufficientFunds), "available: 50 USDC on base"},
		{"insufficient on solana", WithdrawRequest{ToAddress: solTo, AmountUSD: dec("1")}, isErr(ErrInsufficientFunds), "available: 0 USDC on solana"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := svc.Withdraw(ctx, w.v, confirmed(t, e.db, w.u, tc.req))
			require.Error(t, err)
			require.True(t, tc.check(err), "%T %v", err, err)
			require.Contains(t, err.Error(), tc.detail)

			n, err := e.db.Ent.Transfer.Query().Count(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, n, "no transfer recorded")
			require.Empty(t, e.userEvents(t, w.u), "no event")
			requireDecimal(t, "50", e.onChain(t, chains.Base, w.wallets[chains.Base]))
			requireDecimal(t, "0", e.onChain(t, chains.Base, evmTo))
		})
	}
	// Within every limit, the whole balance goes (to the address in
	// whatever case it was given).
	res, _, err := svc.Withdraw(ctx, w.v, confirmed(t, e.db, w.u, WithdrawRequest{ToAddress: mixedCase, AmountUSD: dec("30")}))
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
	require.True(t, strings.EqualFold(evmTo, res.ToAddress))
	requireDecimal(t, "29.97", e.onChain(t, chains.Base, evmTo))
}

// flipFirstLetter changes the case of an EIP-55 address's first hex
// letter: the same address with a wrong checksum.
func flipFirstLetter(addr string) string {
	b := []byte(addr)
	for i := 2; i < len(b); i++ {
		switch {
		case b[i] >= 'a' && b[i] <= 'f':
			b[i] -= 'a' - 'A'
			return string(b)
		case b[i] >= 'A' && b[i] <= 'F':
			b[i] += 'a' - 'A'
			return string(b)
		}
	}
	return addr
}

// A withdrawal on each chain, to a fresh external address: the address
// receives amount - fee, the treasury the fee, the user is told
// (withdrawal.completed) and sees it listed; no agent's counters move. On
// Solana the address has no USDC token account: the treasury creates it
// and pays its rent, besides the transactions' fees.
func TestWithdrawDelivers(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			w := e.withdrawer(t)
			e.fundUser(t, w, c, "20")
			to := e.externalAddress(t, c)
			feesBefore, err := e.svc.completedTransferTotals(ctx, true)
			require.NoError(t, err)
			statsBefore, err := e.svc.Stats(ctx)
			require.NoError(t, err)
			var lamportsBefore uint64
			if c == chains.Solana {
				// The treasury's own token account exists (as it does once
				// it has collected a fee), so only the address's is new.
				e.env.Fund(t, c, e.treasuryAddress(c), 1)
				lamportsBefore = e.lamports(t, e.treasuryAddress(c))
			}
			treasuryBefore := e.onChain(t, c, e.treasuryAddress(c))
			live, err := e.svc.WatchViewerEvents(ctx, signedIn(t, e.svc, w.u), nil)
			require.NoError(t, err)

			res, _, err := e.svc.Withdraw(ctx, w.v, confirmed(t, e.db, w.u, WithdrawRequest{ToAddress: to, AmountUSD: dec("10"), Memo: "rent"}))
			require.NoError(t, err)
			require.Equal(t, "completed", res.Status)
			require.Equal(t, c, res.Chain, "the address's format names the chain")
			requireDecimal(t, "10", res.Amount)
			requireDecimal(t, "9.99", res.Delivered)
			requireDecimal(t, "0.01", res.Fee)
			require.NotEmpty(t, res.TxHash)
			require.NotEmpty(t, res.FeeTxHash)
			require.Equal(t, "Withdrew 10.00 USDC to "+to+" on "+string(c)+": 9.99 USDC delivered, 0.01 USDC (0.1% fee) routed to the treasury.", res.Message)
			tr := res.Transfer
			requireTransferKind(t, e.db, tr, transfer.KindWithdrawal)
			require.Equal(t, w.u.ID, *tr.FromUserID)
			require.Nil(t, tr.FromAgentID)
			require.Nil(t, tr.ToAgentID)
			require.Nil(t, tr.ToUserID)
			require.Equal(t, w.wallets[c], tr.FromAddress)
			require.Equal(t, to, tr.ToAddress)
			require.Equal(t, "rent", tr.Memo)

			requireDecimal(t, "9.99", e.onChain(t, c, to), "the external address")
			requireDecimal(t, "10", e.onChain(t, c, w.wallets[c]), "the user's wallet")
			requireDecimal(t, "0.01", e.onChain(t, c, e.treasuryAddress(c)).Sub(treasuryBefore), "the treasury")
			feesAfter, err := e.svc.completedTransferTotals(ctx, true)
			require.NoError(t, err)
			requireDecimal(t, "0.01", feesAfter.fee.Sub(feesBefore.fee), "the treasury's fee total")
			statsAfter, err := e.svc.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, statsBefore.Transfers, statsAfter.Transfers, "agent statistics count agents' sends")
			if c == chains.Solana {
				spent := lamportsBefore - e.lamports(t, e.treasuryAddress(c))
				rent, err := e.env.Solana().Client().GetMinimumBalanceForRentExemption(ctx, 165, rpc.CommitmentConfirmed)
				require.NoError(t, err)
				require.Greater(t, spent, rent, "the treasury paid the new token account's rent")
				require.LessOrEqual(t, spent-rent, uint64(50_000), "and the two transactions' fees")
				t.Logf("solana withdrawal to a new address cost the treasury %d lamports: rent %d, fees %d", spent, rent, spent-rent)
			}

			select {
			case ev := <-live:
				require.Equal(t, EventWithdrawalCompleted, ev.Kind)
				var data map[string]any
				d := json.NewDecoder(strings.NewReader(string(ev.Data)))
				d.UseNumber()
				require.NoError(t, d.Decode(&data))
				require.Equal(t, tr.ID.String(), data["transaction_id"])
				require.Equal(t, to, data["to_address"])
				require.Equal(t, json.Number("10"), data["amount_usd"])
				require.Equal(t, json.Number("9.99"), data["delivered_usd"])
				require.Equal(t, json.Number("0.01"), data["fee_usd"])
				require.Equal(t, "completed", data["status"])
				require.Equal(t, res.TxHash, data["tx_hash"])
			case <-time.After(30 * time.Second):
				t.Fatal("the user was not told")
			}
			require.Len(t, e.userEvents(t, w.u), 1)

			list, err := e.svc.Withdrawals(ctx, w.u, nil)
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, tr.ID, list[0].Transfer.ID)
			require.Equal(t, res.Message, list[0].Message)
		})
	}
}

// lamports reads an account's SOL balance on the Solana devnet.
func (e *sendEnv) lamports(t testing.TB, address string) uint64 {
	t.Helper()
	out, err := e.env.Solana().Client().GetBalance(context.Background(), solanago.MustPublicKeyFromBase58(address), rpc.CommitmentConfirmed)
	require.NoError(t, err)
	return out.Value
}

// Two concurrent withdrawals that together exceed the balance: exactly one
// goes, the other is refused for funds, and the chain agrees.
func TestConcurrentWithdrawalsNeverOverdraw(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			w := e.withdrawer(t)
			e.fundUser(t, w, c, "10")
			to := e.externalAddress(t, c)
			var (
				wg   sync.WaitGroup
				errs [2]error
				res  [2]*Withdrawal
			)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i], _, errs[i] = e.svc.Withdraw(ctx, w.v, confirmed(t, e.db, w.u, WithdrawRequest{ToAddress: to, AmountUSD: dec("6")}))
				}()
			}
			wg.Wait()
			ok := 0
			for i, err := range errs {
				if err == nil {
					ok++
					require.Equal(t, "completed", res[i].Status)
					continue
				}
				require.ErrorIs(t, err, ErrInsufficientFunds)
			}
			require.Equal(t, 1, ok, "exactly one withdrawal goes: %v", errs)
			requireDecimal(t, "4", e.onChain(t, c, w.wallets[c]))
			requireDecimal(t, "5.994", e.onChain(t, c, to))
			n, err := e.db.Ent.Transfer.Query().Where(transfer.FromUserID(w.u.ID)).Count(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		})
	}
}

// A withdrawal recorded but never broadcast (the process died right after
// recording it), and one broadcast but never recorded: the reconciler
// finishes each once, exactly as an agent's send, and tells the user once.
func TestReconcileFinishesWithdrawals(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	opts := reconcileOptions{MinAge: -1, SolanaResendAfter: -1}
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		for _, crash := range []string{"after recording", "after broadcast"} {
			t.Run(string(c)+" "+crash, func(t *testing.T) {
				w := e.withdrawer(t)
				e.fundUser(t, w, c, "20")
				to := e.externalAddress(t, c)
				treasuryBefore := e.onChain(t, c, e.treasuryAddress(c))
				// Recorded by Withdraw's own path, then not started.
				tr, err := e.svc.recordTransfer(ctx, &outgoing{
					kind: transfer.KindWithdrawal, from: userHolder(w.u), external: map[chains.Name]string{c: to}, candidates: []chains.Name{c},
					units: 10_000_000, amount: dec("10"),
				})
				require.NoError(t, err)
				require.Equal(t, transfer.StatusPending, tr.Status)
				if crash == "after broadcast" {
					e.broadcastLegs(t, tr)
				}
				// In flight, it counts as spent: 10 more is refused.
				_, _, err = e.svc.Withdraw(ctx, w.v, confirmed(t, e.db, w.u, WithdrawRequest{ToAddress: to, AmountUSD: dec("10.01")}))
				require.ErrorIs(t, err, ErrInsufficientFunds)

				got := e.reconcileUntilDone(t, tr, opts)
				require.Equal(t, transfer.StatusCompleted, got.Status)
				require.NotEmpty(t, got.TxHash)
				require.NotEmpty(t, got.FeeTxHash)
				// Once more changes nothing.
				_, err = e.svc.reconcileTransfersWith(ctx, opts)
				require.NoError(t, err)

				requireDecimal(t, "10", e.onChain(t, c, w.wallets[c]), "paid once")
				requireDecimal(t, "9.99", e.onChain(t, c, to))
				requireDecimal(t, "0.01", e.onChain(t, c, e.treasuryAddress(c)).Sub(treasuryBefore))
				evs := e.userEvents(t, w.u)
				require.Len(t, evs, 1, "told once")
				require.Equal(t, EventWithdrawalCompleted, evs[0].Kind)
			})
		}
	}
}

// A withdrawal that fails (nothing moved) is marked failed once and the
// user is told (withdrawal.failed), its reason in the data.
func TestWithdrawalFailureTellsTheUser(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	w := e.withdrawer(t)
	e.fundUser(t, w, chains.Base, "5")
	to := e.externalAddress(t, chains.Base)
	tr, err := e.svc.recordTransfer(ctx, &outgoing{
		kind: transfer.KindWithdrawal, from: userHolder(w.u), external: map[chains.Name]string{chains.Base: to}, candidates: []chains.Name{chains.Base},
		units: 1_000_000, amount: dec("1"),
	})
	require.NoError(t, err)
	require.NoError(t, e.svc.failTransfer(ctx, tr, "transfer refused by base: test"))
	require.NoError(t, e.svc.failTransfer(ctx, tr, "again"), "failing twice is a no-op")
	evs := e.userEvents(t, w.u)
	require.Len(t, evs, 1)
	require.Equal(t, EventWithdrawalFailed, evs[0].Kind)
	require.Contains(t, string(evs[0].Data), `"status":"failed"`)
	require.Contains(t, string(evs[0].Data), `"error":"transfer refused by base: test"`)
	list, err := e.svc.Withdrawals(ctx, w.u, nil)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "failed", list[0].Status)
	require.Contains(t, list[0].Message, "failed, nothing moved: transfer refused by base: test")
	// Failed withdrawals do not count against the balance.
	res, _, err := e.svc.Withdraw(ctx, w.v, confirmed(t, e.db, w.u, WithdrawRequest{ToAddress: to, AmountUSD: dec("5")}))
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
}

// Under an idempotency key a withdrawal runs once: the same request again
// answers the first (replayed), another request with the key is refused,
// and a user's key is not an agent's.
func TestWithdrawIdempotent(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	w := e.withdrawer(t)
	e.fundUser(t, w, chains.Base, "10")
	to := e.externalAddress(t, chains.Base)
	key := "wd-1"
	req := WithdrawRequest{ToAddress: to, AmountUSD: dec("3")}
	first, replayed, err := withdrawKeyed(e.svc, ctx, w.v, &key, confirmed(t, e.db, w.u, req))
	require.NoError(t, err)
	require.False(t, replayed)
	// A replay moves nothing, so it needs no step-up (its own was spent).
	again, replayed, err := withdrawKeyed(e.svc, ctx, w.v, &key, WithdrawRequest{ToAddress: " " + to, AmountUSD: dec("3.00")})
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Transfer.ID, again.Transfer.ID)
	require.Equal(t, first.Message, again.Message)
	_, _, err = withdrawKeyed(e.svc, ctx, w.v, &key, WithdrawRequest{ToAddress: to, AmountUSD: dec("4")})
	require.ErrorIs(t, err, ErrIdempotencyKeyReused)
	requireDecimal(t, "7", e.onChain(t, chains.Base, w.wallets[chains.Base]), "withdrawn once")

	// An agent with the same key runs its own request.
	a, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, a, chains.Base, "2")
	res, replayed, err := sendKeyed(e.svc, ctx, a, &key, SendRequest{ToUsername: bob.Username, AmountUSD: decimal.NewFromInt(1)})
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "completed", res.Status)
}
