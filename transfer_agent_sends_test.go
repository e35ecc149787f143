package agentpay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"maps"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
)

// sendEnv is a service whose agents' wallets live on a Base devnet (a block
// every 50 ms) and a Solana devnet, with a treasury funded with gas on both.
type sendEnv struct {
	env *testenv.Env
	svc *Service
	db  *store.DB
}

// startSendEnv starts both devnets and a service on a fresh database.
func startSendEnv(t testing.TB) *sendEnv {
	t.Helper()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}, BlockTime: 50 * time.Millisecond})
	return &sendEnv{env: env, svc: newTestService(t, env, Config{AgentMode: ModeTest}), db: env.DB}
}

func randomName(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return prefix + "_" + hex.EncodeToString(b)
}

// register creates an agent through QuickRegister.
func (e *sendEnv) register(t testing.TB, prefix string) *ent.Agent {
	t.Helper()
	reg, err := e.svc.QuickRegister(context.Background(), randomName(t, prefix))
	require.NoError(t, err)
	return reg.Agent
}

func (e *sendEnv) wallet(t testing.TB, a *ent.Agent, c chains.Name) string {
	t.Helper()
	ws, err := e.svc.Wallets(context.Background(), a)
	require.NoError(t, err)
	w := walletOn(ws.All, c)
	require.NotNil(t, w, "agent has a %s wallet", c)
	return w.Address
}

// fund sends USDC from the devnet faucet to the agent's wallet on chain.
func (e *sendEnv) fund(t testing.TB, a *ent.Agent, c chains.Name, usdc string) {
	t.Helper()
	units := decimal.RequireFromString(usdc).Shift(6).IntPart()
	e.env.Fund(t, c, e.wallet(t, a, c), units)
}

func (e *sendEnv) ledger(c chains.Name) chains.Ledger { return e.env.Ledger(c) }

// onChain reads an address's USDC straight from the chain, in USDC. On
// base it first waits for the next block: geth makes a block's receipts
// readable a moment before its state becomes "latest", so a read right
// after a send saw its receipts could miss its last leg.
func (e *sendEnv) onChain(t testing.TB, c chains.Name, address string) decimal.Decimal {
	t.Helper()
	ctx := context.Background()
	if c != chains.Solana {
		head, err := e.env.EVM(chains.Base).Client().BlockNumber(ctx)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			n, err := e.env.EVM(chains.Base).Client().BlockNumber(ctx)
			return err == nil && n > head
		}, 30*time.Second, 5*time.Millisecond, "base stopped making blocks")
	}
	b, err := e.ledger(c).Balance(ctx, address)
	require.NoError(t, err)
	return FromBaseUnits(b, 6)
}

func (e *sendEnv) treasuryAddress(c chains.Name) string { return e.env.Treasury.Address(c) }

func (e *sendEnv) agent(t testing.TB, a *ent.Agent) *ent.Agent {
	t.Helper()
	out, err := e.db.Ent.Agent.Get(context.Background(), a.ID)
	require.NoError(t, err)
	return out
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func requireDecimal(t testing.TB, want string, got decimal.Decimal, msg ...any) {
	t.Helper()
	require.True(t, dec(want).Equal(got), "want %s, got %s %v", want, got, msg)
}

func TestTransferFee(t *testing.T) {
	for _, tc := range []struct {
		amount, fee string
	}{
		{"50", "0.05"},
		{"0.01", "0.00001"},      // the minimum: never a zero fee
		{"0.012345", "0.000012"}, // 12.345 units rounds down
		{"0.0125", "0.000013"},   // 12.5 units: halves round up
		{"0.012499", "0.000012"},
		{"1234.567891", "1.234568"},
		{"250000", "250"},
	} {
		t.Run(tc.amount, func(t *testing.T) {
			units := dec(tc.amount).Shift(6).IntPart()
			fee := TransferFee(units)
			requireDecimal(t, tc.fee, decimal.New(fee, -6))
		})
	}
}

// A send of 50 delivers 49.95 to the recipient and 0.05 to the treasury, on
// each chain, as read back from the chain; the counters and the treasury's
// fee total follow.
func TestSendDeliversNetAndFee(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		t.Run(string(c), func(t *testing.T) {
			alice, bob := e.register(t, "alice"), e.register(t, "bob")
			e.fund(t, alice, c, "100")
			treasuryBefore := e.onChain(t, c, e.treasuryAddress(c))
			feesBefore, err := e.svc.completedTransferTotals(ctx, true)
			require.NoError(t, err)

			res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("50"), Chain: string(c), Memo: "lunch"})
			require.NoError(t, err)
			require.Equal(t, "completed", res.Status)
			require.Equal(t, c, res.Chain)
			requireDecimal(t, "50", res.Amount)
			requireDecimal(t, "49.95", res.Delivered)
			requireDecimal(t, "0.05", res.Fee)
			require.NotEmpty(t, res.TxHash)
			require.NotEmpty(t, res.FeeTxHash)
			require.Contains(t, res.Message, "Sent 50.00 USDC")
			require.Contains(t, res.Message, "49.95 USDC delivered")
			require.Contains(t, res.Message, "0.05 USDC")
			require.Equal(t, alice.Username, res.FromUsername)
			require.Equal(t, bob.Username, res.ToUsername)

			tr := res.Transfer
			requireTransferKind(t, e.db, tr, transfer.KindSend)
			require.Equal(t, transfer.StatusCompleted, tr.Status)
			require.EqualValues(t, 50_000_000, tr.Amount)
			require.EqualValues(t, 50_000, tr.Fee)
			require.EqualValues(t, 49_950_000, tr.Net)
			require.NotNil(t, tr.SubmittedAt)
			require.NotNil(t, tr.CompletedAt)
			require.Len(t, tr.Ref, 32)
			require.Len(t, tr.FeeRef, 32)
			require.Equal(t, "lunch", tr.Memo)

			requireDecimal(t, "50", e.onChain(t, c, e.wallet(t, alice, c)), "sender")
			requireDecimal(t, "49.95", e.onChain(t, c, e.wallet(t, bob, c)), "recipient")
			requireDecimal(t, "0.05", e.onChain(t, c, e.treasuryAddress(c)).Sub(treasuryBefore), "treasury")

			feesAfter, err := e.svc.completedTransferTotals(ctx, true)
			require.NoError(t, err)
			requireDecimal(t, "0.05", feesAfter.fee.Sub(feesBefore.fee), "fee total")

			a, b := e.agent(t, alice), e.agent(t, bob)
			require.EqualValues(t, 1, a.TxCount)
			require.EqualValues(t, 50_000_000, a.VolumeSent)
			require.EqualValues(t, 50_000, a.FeesPaid)
			require.EqualValues(t, 1, b.TxCount)
			require.EqualValues(t, 49_950_000, b.VolumeReceived)

			bal, err := e.svc.Balance(ctx, alice)
			require.NoError(t, err)
			require.Len(t, bal.Balances, 2)
			require.Equal(t, chains.Solana, bal.Balances[0].Chain)
			require.Equal(t, chains.Base, bal.Balances[1].Chain)
			requireDecimal(t, "50", bal.TotalUSD)
		})
	}
}

// Without a chain, the first of solana, base whose balance covers the send.
func TestSendPicksChain(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Solana, "3")
	e.fund(t, alice, chains.Base, "10")

	res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("2")})
	require.NoError(t, err)
	require.Equal(t, chains.Solana, res.Chain, "solana first when it covers the amount")
	res, _, err = e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("5")})
	require.NoError(t, err)
	require.Equal(t, chains.Base, res.Chain, "base when solana falls short")
	requireDecimal(t, "1.998", e.onChain(t, chains.Solana, e.wallet(t, bob, chains.Solana)))
	requireDecimal(t, "4.995", e.onChain(t, chains.Base, e.wallet(t, bob, chains.Base)))

	bal, err := e.svc.Balance(ctx, bob)
	require.NoError(t, err)
	requireDecimal(t, "6.993", bal.TotalUSD)
	requireDecimal(t, "1.998", bal.Balances[0].Balance)
	requireDecimal(t, "4.995", bal.Balances[1].Balance)
	require.Equal(t, "USDC", bal.Balances[0].Token)
	require.Equal(t, e.wallet(t, bob, chains.Base), bal.Balances[1].Address)
}

// Each refusal is refused with its error and changes nothing: no transfer
// row, no balance moved.
func TestSendRefusals(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "50")
	// 440 USD already sent today (a T0 agent may send 500 a day).
	_, err := e.db.Ent.Transfer.Create().SetKind(transfer.KindSend).
		SetFromAgentID(alice.ID).SetToAgentID(bob.ID).SetChain("base").
		SetFromAddress(e.wallet(t, alice, chains.Base)).SetToAddress(e.wallet(t, bob, chains.Base)).
		SetAmount(440_000_000).SetFee(440_000).SetNet(439_560_000).
		SetRef(randomRef(t)).SetFeeRef(randomRef(t)).SetStatus(transfer.StatusCompleted).
		Save(ctx)
	require.NoError(t, err)

	refusalOfCase := map[string]sendRefusal{
		"below minimum": refuseAmount, "zero": refuseAmount, "negative": refuseAmount, "seven decimals": refuseAmount,
		"unknown chain": refuseChain, "chain without agent wallets": refuseChain, "no recipient": refuseRecipientMissing,
		"unknown recipient": refuseRecipientUnknown, "self": refuseSelf, "memo too long": refuseMemo,
		"per-send limit": refusePerSendLimit, "daily limit": refuseDailyLimit, "insufficient on the chain": refuseBalance,
		"insufficient anywhere": refuseBalance, "insufficient on solana": refuseBalance,
	}
	for _, tc := range []struct {
		name   string
		req    SendRequest
		check  func(error) bool
		detail string
	}{
		{"below minimum", SendRequest{ToUsername: bob.Username, AmountUSD: dec("0.009"), Chain: "base"}, IsValidation, "at least 0.01"},
		{"zero", SendRequest{ToUsername: bob.Username, AmountUSD: dec("0"), Chain: "base"}, IsValidation, "at least 0.01"},
		{"negative", SendRequest{ToUsername: bob.Username, AmountUSD: dec("-5"), Chain: "base"}, IsValidation, "at least 0.01"},
		{"seven decimals", SendRequest{ToUsername: bob.Username, AmountUSD: dec("1.0000001"), Chain: "base"}, IsValidation, "more than 6 decimal"},
		{"unknown chain", SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "bitcoin"}, IsValidation, "unknown chain"},
		{"chain without agent wallets", SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "polygon"}, IsValidation, "solana and base"},
		{"no recipient", SendRequest{AmountUSD: dec("1"), Chain: "base"}, IsValidation, "to_username"},
		{"unknown recipient", SendRequest{ToUsername: "nobody_here", AmountUSD: dec("1"), Chain: "base"}, isErr(ErrNotFound), "nobody_here"},
		{"self", SendRequest{ToUsername: alice.Username, AmountUSD: dec("1"), Chain: "base"}, IsValidation, "yourself"},
		{"memo too long", SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Memo: string(make([]byte, 501)), Chain: "base"}, IsValidation, "memo"},
		{"per-send limit", SendRequest{ToUsername: bob.Username, AmountUSD: dec("100.01"), Chain: "base"}, isErr(ErrForbidden), "per-send limit of 100 USD"},
		{"daily limit", SendRequest{ToUsername: bob.Username, AmountUSD: dec("60.01"), Chain: "base"}, isErr(ErrForbidden), "daily limit of 500 USD"},
		{"insufficient on the chain", SendRequest{ToUsername: bob.Username, AmountUSD: dec("50.000001"), Chain: "base"}, isErr(ErrInsufficientFunds), "available: 50 USDC on base"},
		{"insufficient anywhere", SendRequest{ToUsername: bob.Username, AmountUSD: dec("50.5")}, isErr(ErrInsufficientFunds), "available: 0 USDC on solana, 50 USDC on base"},
		{"insufficient on solana", SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "solana"}, isErr(ErrInsufficientFunds), "available: 0 USDC on solana"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.Send(ctx, alice, tc.req)
			require.Error(t, err)
			require.True(t, tc.check(err), "%T %v", err, err)
			require.Contains(t, err.Error(), tc.detail)
			require.Equal(t, refusalOfCase[tc.name], refusalOfSend(err), "named as Send's doc lists it")

			n, err := e.db.Ent.Transfer.Query().Count(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n, "no transfer recorded")
			requireDecimal(t, "50", e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base)))
			requireDecimal(t, "0", e.onChain(t, chains.Base, e.wallet(t, bob, chains.Base)))
		})
	}
	// And exactly the whole balance can be sent.
	res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("50"), Chain: "base"})
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
}

func isErr(target error) func(error) bool {
	return func(err error) bool { return errorsIs(err, target) }
}

func randomRef(t testing.TB) []byte {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// Concurrent sends from one wallet never overdraw it: 20 sends of 5 from a
// wallet holding 50, at most 10 succeed, the others are refused, and the
// chain agrees.
func TestConcurrentSendsNeverOverdraw(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "50")

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		successes int
		refusals  []error
	)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := e.svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("5"), Chain: "base"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refusals = append(refusals, err)
				return
			}
			require.Equal(t, "completed", res.Status)
			successes++
		}()
	}
	wg.Wait()
	require.Positive(t, successes, "a wallet holding 50 can send 5: refusing everything is not safety")
	require.LessOrEqual(t, successes, 10)
	require.Equal(t, 20, successes+len(refusals))
	for _, err := range refusals {
		require.ErrorIs(t, err, ErrInsufficientFunds)
	}
	left := dec("50").Sub(dec("5").Mul(decimal.NewFromInt(int64(successes))))
	requireDecimal(t, left.String(), e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base)))
	requireDecimal(t, dec("4.995").Mul(decimal.NewFromInt(int64(successes))).String(), e.onChain(t, chains.Base, e.wallet(t, bob, chains.Base)))
	t.Logf("%d of 20 sends succeeded", successes)
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// balanceProbe is a real ledger with a hook run after each balance read: the
// chain answers, the hook watches what else can happen meanwhile.
type balanceProbe struct {
	chains.Ledger
	afterBalance func()
}

func (p *balanceProbe) Balance(ctx context.Context, address string) (*big.Int, error) {
	b, err := p.Ledger.Balance(ctx, address)
	if p.afterBalance != nil {
		p.afterBalance()
	}
	return b, err
}

// withBaseLedger is e's service with base's ledger replaced by l.
func (e *sendEnv) withBaseLedger(t *testing.T, l chains.Ledger) *Service {
	t.Helper()
	nets := maps.Clone(e.env.Test)
	n := nets[chains.Base]
	n.Ledger = l
	nets[chains.Base] = n
	return newTestService(t, e.env, Config{AgentMode: ModeTest, Test: nets})
}

// TestSendReadsBalanceOutsideItsTransaction: while a send reads the chain no
// transaction of it is open, so another writer can take the sender's wallet
// rows (on SQLite, the database) at that very moment: a slow or hung RPC
// holds up no one else's writes.
func TestSendReadsBalanceOutsideItsTransaction(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "10")

	var (
		reads   int
		blocked error
	)
	probe := &balanceProbe{Ledger: e.ledger(chains.Base)}
	probe.afterBalance = func() {
		reads++
		lockCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		blocked = errors.Join(blocked, e.db.WithTx(lockCtx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
			_, err := store.ForUpdate(e.db, tx.Wallet.Query().Where(wallet.AgentID(alice.ID))).All(ctx)
			return err
		}))
	}
	res, _, err := e.withBaseLedger(t, probe).Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("1"), Chain: "base"})
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
	require.Positive(t, reads)
	require.NoError(t, blocked, "the balance was read while the send held the wallet")
}

// TestSendRechecksAfterAConcurrentSend: a send recorded from the same wallet
// between another send's balance read and its lock makes that one read
// again, so the two never spend more than the wallet holds between them:
// the second is refused and nothing more is recorded.
func TestSendRechecksAfterAConcurrentSend(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	alice, bob := e.register(t, "alice"), e.register(t, "bob")
	e.fund(t, alice, chains.Base, "10")

	var (
		fired    atomic.Bool
		inner    *SendResult
		innerErr error
		svc      *Service
	)
	probe := &balanceProbe{Ledger: e.ledger(chains.Base)}
	probe.afterBalance = func() {
		// The outer send has read 10 USDC; another send of 6 goes through
		// before it takes the lock.
		if fired.CompareAndSwap(false, true) {
			inner, _, innerErr = svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("6"), Chain: "base"})
		}
	}
	svc = e.withBaseLedger(t, probe)
	_, _, err := svc.Send(ctx, alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("6"), Chain: "base"})
	require.NoError(t, innerErr)
	require.Equal(t, "completed", inner.Status)
	require.ErrorIs(t, err, ErrInsufficientFunds)
	n, err := e.db.Ent.Transfer.Query().Where(transfer.FromAgentID(alice.ID)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the refused send recorded nothing")
	requireDecimal(t, "4", e.onChain(t, chains.Base, e.wallet(t, alice, chains.Base)))
}
