package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/gagliardetto/solana-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/depositaddress"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
	"agentpay/ent/settlementbatch"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
	"agentpay/internal/statusbus"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// chaosSeed replays a run of TestBooksBalanceAfterRandomKills: the seed it
// logged (also CHAOS_SEED). 0: a new seed.
var chaosSeed = flag.Uint64("chaos.seed", 0, "seed of TestBooksBalanceAfterRandomKills (0: random; CHAOS_SEED also works)")

// chaosLiquidity is the USDC the chaos test gives the treasury on each
// chain, in base units: for payouts across chains (a refund after a payout
// is paid from the merchant's unsettled payments, never advanced).
const chaosLiquidity = 300_000_000

// chaosChains are the devnets the chaos test pays on.
var chaosChains = []chains.Name{chains.Base, chains.Solana}

// TestBooksBalanceAfterRandomKills runs a random mix of everything that
// moves money (payments exact, under then topped up, over, late, repeated
// to an old address, one session paid on two chains; sends from agents to
// an agent and to a human; settlements in batches; sweeps; refunds,
// partial and full, before the payout, and after it when the merchant
// holds unsettled payments to pay them from, refused otherwise) while the worker is
// killed and restarted at random points (softly, its jobs cancelled, or
// dead as a process dies: also right after a broadcast, before its
// record), lets a last worker finish everything, and then checks each
// devnet to the base unit: the service's books balance (Service.Books:
// every holder's balance equals its records), and, the test's own
// account of it, no token created or lost (what the tracked addresses
// hold is what the faucet sent them), every deposit
// address emptied, each merchant's settlement address holding exactly the
// nets of its completed batches, each refund recipient exactly its
// completed refunds, the treasury exactly what the records leave it, and
// nobody received more than was paid: per merchant and chain, payouts,
// fees, refunds and what is held add up to what was paid in, with no
// deficit left for the treasury to carry.
//
// One seed decides the scenario and the kills; it is logged, and
// `-chaos.seed N` (or CHAOS_SEED=N) replays it (docs/testing.md).
func TestBooksBalanceAfterRandomKills(t *testing.T) {
	seed := *chaosSeed
	if s := os.Getenv("CHAOS_SEED"); s != "" && seed == 0 {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "CHAOS_SEED")
		seed = v
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (replay: go test ./worker -run TestBooksBalanceAfterRandomKills -chaos.seed %d)", seed, seed)
	start := time.Now()
	c := newChaos(t, seed)
	c.run()
	t.Logf("chaos seed %d: %d steps, %d kills, %s", seed, c.steps, c.kills, time.Since(start).Round(time.Second))
}

// chaos is one run: the harness, the worker being killed, and what the
// test sent where (the expected side of the books).
type chaos struct {
	t   *testing.T
	ctx context.Context
	h   *harness
	env *testenv.Env
	rng *rand.Rand
	// killRng decides the kills, apart from the scenario's rng so the
	// scenario does not depend on how many kills happened.
	killRng *rand.Rand

	merchants []*chaosMerchant
	agents    []*agentpay.Registration
	// human is a human user's username, whom agents send to as well.
	human string

	mu sync.Mutex
	// funded is what the faucet sent into the tracked addresses (fundings
	// and payments), per chain.
	funded map[chains.Name]int64
	// initial is what the tracked addresses held before the test sent
	// anything (the treasury's gas funding holds no USDC; kept anyway).
	initial map[chains.Name]int64
	// deposits is the number of faucet transfers to deposit addresses:
	// each is one payment once scanned.
	deposits int
	// recipients are the fresh addresses refunds were sent to.
	recipients map[chains.Name][]string
	// paid are sessions paid in full on one chain: candidates for a
	// repeat payment.
	paid []chaosDeposit
	// topUps are underpaid deposits still owed their remainder.
	topUps []chaosTopUp

	// cfg is the service's configuration, for workers' services of their
	// own.
	cfg    agentpay.Config
	worker *chaosWorker
	// crashes carries a worker's request to be killed right after its
	// broadcast (crashAfterBroadcast) to the killer; nil when the killer
	// is not running. crashRng decides which broadcasts crash.
	crashMu  sync.Mutex
	crashes  chan chaosCrash
	crashRng *rand.Rand
	// dead are the workers killed as a process dies, winding down.
	dead  []*chaosWorker
	steps int
	kills int
}

type chaosMerchant struct {
	auth    *agentpay.MerchantAuth
	chain   chains.Name
	address string
}

type chaosDeposit struct {
	chain   chains.Name
	address string
}

type chaosTopUp struct {
	chaosDeposit
	units int64
}

func newChaos(t *testing.T, seed uint64) *chaos {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: chaosChains, Jobs: true, BlockTime: 100 * time.Millisecond})
	cfg := agentpay.Config{
		AgentMode: agentpay.ModeTest,
		Settlement: agentpay.SettlementOptions{
			Wait: 10 * time.Second,
			// A Solana leg whose broadcast a kill cut off is looked up by
			// its memo, and sent again this soon (default 3 minutes).
			SolanaResendAfter: 5 * time.Second,
			// Small batches, formed soon: several per merchant and chain.
			BatchMinimum:  decimal.NewFromInt(8),
			BatchInterval: 2 * time.Second,
		},
	}
	// One bus for every worker's service: each would open its own
	// LISTEN connection on PostgreSQL.
	cfg.Bus = statusbus.New(env.DB, env.Logger)
	h := newHarness(t, env, cfg)
	env.Fill(&cfg)
	c := &chaos{
		t: t, ctx: ctx, h: h, env: env, cfg: cfg,
		rng:        rand.New(rand.NewPCG(seed, 1)),
		killRng:    rand.New(rand.NewPCG(seed, 2)),
		crashRng:   rand.New(rand.NewPCG(seed, 3)),
		funded:     map[chains.Name]int64{},
		initial:    map[chains.Name]int64{},
		recipients: map[chains.Name][]string{},
	}
	for _, chain := range chaosChains {
		c.initial[chain] = env.Balance(t, chain, env.Treasury.Address(chain)).Int64()
	}

	receiver := testenv.NewReceiver(t, http.StatusOK)
	hook := receiver.URL
	// One merchant paid out on each chain: payments on the other chain
	// are paid out across chains, from the treasury's own USDC there.
	for i, chain := range chaosChains {
		name, email, settleChain, typ := fmt.Sprintf("Shop %d", i), fmt.Sprintf("shop%d@example.com", i), string(chain), "crypto_usdc"
		address := c.freshAddress(chain)
		reg, err := h.svc.RegisterMerchant(ctx, agentpay.MerchantInput{
			Name: &name, Email: &email, WebhookURL: &hook,
			SettlementType: &typ, SettlementAddress: &address, SettlementChain: &settleChain,
		})
		require.NoError(t, err)
		c.merchants = append(c.merchants, &chaosMerchant{
			auth:  &agentpay.MerchantAuth{Merchant: reg.Merchant, Mode: agentpay.ModeTest},
			chain: chain, address: address,
		})
	}
	// The treasury's liquidity: payouts across chains.
	for _, chain := range chaosChains {
		c.fund(chain, env.Treasury.Address(chain), chaosLiquidity)
	}
	for i := range 2 {
		reg, err := h.svc.QuickRegister(ctx, fmt.Sprintf("chaos_agent_%d", i))
		require.NoError(t, err)
		for _, w := range reg.Wallets {
			c.fund(chains.Name(w.Chain), w.Address, 40_000_000)
		}
		c.agents = append(c.agents, reg)
	}
	human, err := h.svc.CreateUser(ctx, agentpay.NewUser{Email: "chaos_human@example.com", Username: "chaos_human"})
	require.NoError(t, err)
	c.human = human.Username
	return c
}

// fund sends units from the devnet's faucet to address, counted in.
func (c *chaos) fund(chain chains.Name, address string, units int64) {
	c.t.Helper()
	c.env.Fund(c.t, chain, address, units)
	c.mu.Lock()
	c.funded[chain] += units
	c.mu.Unlock()
}

// pay sends units to a deposit address from the devnet's faucet, as a
// customer pays (not through Env.Fund: a payment is not a funding of the
// address), and returns once it is included: one payment once scanned.
func (c *chaos) pay(d chaosDeposit, units int64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	var err error
	if d.chain == chains.Solana {
		_, err = c.env.Solana().Send(ctx, solana.MustPublicKeyFromBase58(d.address), uint64(units))
	} else {
		_, err = c.env.EVM(d.chain).Send(ctx, common.HexToAddress(d.address), big.NewInt(units))
	}
	require.NoError(c.t, err, "paying %s on %s", d.address, d.chain)
	c.mu.Lock()
	c.funded[d.chain] += units
	c.deposits++
	c.mu.Unlock()
}

// freshAddress is a new address on chain that no one else uses.
func (c *chaos) freshAddress(chain chains.Name) string {
	c.t.Helper()
	if chain == chains.Solana {
		k, err := solana.NewRandomPrivateKey()
		require.NoError(c.t, err)
		return k.PublicKey().String()
	}
	k, err := crypto.GenerateKey()
	require.NoError(c.t, err)
	return crypto.PubkeyToAddress(k.PublicKey).Hex()
}

// amount is a random session amount, 1.00 to 15.99, in USD and base units.
func (c *chaos) amount() (decimal.Decimal, int64) {
	cents := int64(100 + c.rng.IntN(1500))
	return decimal.New(cents, -2), cents * 10_000
}

func (c *chaos) chain() chains.Name { return chaosChains[c.rng.IntN(len(chaosChains))] }

func (c *chaos) merchant() *chaosMerchant { return c.merchants[c.rng.IntN(len(c.merchants))] }

// session opens a session of amount for m and selects each chain.
func (c *chaos) session(m *chaosMerchant, amount decimal.Decimal, on ...chains.Name) (*ent.CheckoutSession, []chaosDeposit) {
	c.t.Helper()
	created, err := c.h.svc.CreateSession(c.ctx, m.auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
	require.NoError(c.t, err)
	var ds []chaosDeposit
	for _, chain := range on {
		d, err := c.h.svc.SelectPaymentMethod(c.ctx, created.Session.ExternalID, "", string(chain), "USDC")
		require.NoError(c.t, err)
		ds = append(ds, chaosDeposit{chain: chain, address: d.Address})
	}
	return created.Session, ds
}

// The scenario's steps.

func (c *chaos) payExact(chain chains.Name) {
	amount, units := c.amount()
	_, ds := c.session(c.merchant(), amount, chain)
	c.pay(ds[0], units)
	c.paid = append(c.paid, ds[0])
	c.t.Logf("step %d: exact %s on %s", c.steps, amount, ds[0].chain)
}

func (c *chaos) payUnder(chain chains.Name) {
	amount, units := c.amount()
	_, ds := c.session(c.merchant(), amount, chain)
	// Neither part is dust (below the chain's minimum worth counting: no
	// payment, dust.go), so each is a payment the drain waits for.
	part := agentpay.DefaultDustMinimumUnits + c.rng.Int64N(units-2*agentpay.DefaultDustMinimumUnits)
	c.pay(ds[0], part)
	c.topUps = append(c.topUps, chaosTopUp{ds[0], units - part})
	c.t.Logf("step %d: under %d of %s on %s", c.steps, part, amount, ds[0].chain)
}

func (c *chaos) topUp() {
	i := c.rng.IntN(len(c.topUps))
	u := c.topUps[i]
	c.topUps = append(c.topUps[:i], c.topUps[i+1:]...)
	c.pay(u.chaosDeposit, u.units)
	c.paid = append(c.paid, u.chaosDeposit)
	c.t.Logf("step %d: top-up %d on %s", c.steps, u.units, u.chain)
}

func (c *chaos) payOver(chain chains.Name) {
	amount, units := c.amount()
	_, ds := c.session(c.merchant(), amount, chain)
	extra := 1 + c.rng.Int64N(3_000_000)
	c.pay(ds[0], units+extra)
	c.t.Logf("step %d: over %s + %d on %s", c.steps, amount, extra, ds[0].chain)
}

// payLate pays a session that has expired (set as the expiry job sets it:
// the late-payment window still watches the address).
func (c *chaos) payLate(chain chains.Name) {
	amount, units := c.amount()
	sess, ds := c.session(c.merchant(), amount, chain)
	c.h.db.Ent.CheckoutSession.UpdateOne(sess).SetStatus(checkoutsession.StatusExpired).ExecX(c.ctx)
	c.pay(ds[0], units)
	c.t.Logf("step %d: late %s on %s", c.steps, amount, ds[0].chain)
}

// payRepeat pays again to the address of a session already paid.
func (c *chaos) payRepeat() {
	d := c.paid[c.rng.IntN(len(c.paid))]
	units := 100_000 + c.rng.Int64N(5_000_000)
	c.pay(d, units)
	c.t.Logf("step %d: repeat %d to an old address on %s", c.steps, units, d.chain)
}

// payTwoChains pays one session in full on both chains.
func (c *chaos) payTwoChains() {
	amount, units := c.amount()
	_, ds := c.session(c.merchant(), amount, chaosChains...)
	for _, d := range ds {
		c.pay(d, units)
	}
	c.t.Logf("step %d: %s paid on both chains", c.steps, amount)
}

func (c *chaos) agentSend(chain chains.Name) {
	from := c.rng.IntN(len(c.agents))
	req := agentpay.SendRequest{
		ToUsername: c.agents[(from+1)%len(c.agents)].Agent.Username,
		AmountUSD:  decimal.New(int64(50+c.rng.IntN(450)), -2), Chain: string(chain), Wait: 2 * time.Second,
	}
	if c.rng.IntN(3) == 0 {
		req.ToUsername, req.ToUser = c.human, true
	}
	res, _, err := c.h.svc.Send(c.ctx, c.agents[from].Agent, req)
	require.NoError(c.t, err, "send")
	c.t.Logf("step %d: agent send %s to %s on %s: %s", c.steps, req.AmountUSD, req.ToUsername, chain, res.Status)
}

// refund returns all or part of a confirmed payment to a fresh address,
// preferring one already paid out (afterPayout) or one not yet.
func (c *chaos) refund(afterPayout bool) {
	ps := c.h.db.Ent.Payment.Query().
		Where(payment.StatusEQ(payment.StatusConfirmed)).
		Order(ent.Asc(payment.FieldCreatedAt)).WithSession().AllX(c.ctx)
	var pick, other []*ent.Payment
	for _, p := range ps {
		if p.AmountToken <= p.RefundedToken {
			continue
		}
		paidOut := p.SettlementStatus != nil && *p.SettlementStatus == payment.SettlementStatusCompleted
		if paidOut == afterPayout {
			pick = append(pick, p)
		} else {
			other = append(other, p)
		}
	}
	if len(pick) == 0 {
		pick, afterPayout = other, !afterPayout
	}
	if len(pick) == 0 {
		c.t.Logf("step %d: refund: no payment to refund yet", c.steps)
		return
	}
	p := pick[c.rng.IntN(len(pick))]
	var auth *agentpay.MerchantAuth
	for _, m := range c.merchants {
		if m.auth.Merchant.ID == p.Edges.Session.MerchantID {
			auth = m.auth
		}
	}
	in := agentpay.RefundInput{PaymentID: p.ExternalID, Address: c.freshAddress(chains.Name(p.Chain)), Reason: "chaos"}
	what := "full"
	if left := p.AmountToken - p.RefundedToken; left > 1 && c.rng.IntN(2) == 0 {
		amount := decimal.New(1+c.rng.Int64N(left-1), -6)
		in.AmountUSD = &amount
		what = amount.String()
	}
	_, err := c.h.svc.CreateRefund(c.ctx, auth, p.Edges.Session.ExternalID, in)
	if err != nil {
		// A refund may race the batch or an earlier refund, and one after
		// the payout is refused unless the merchant holds that much
		// unsettled: refused refunds record nothing, and the books must
		// say so.
		c.t.Logf("step %d: refund %s of %s (after payout %v) refused: %v", c.steps, what, p.ExternalID, afterPayout, err)
		return
	}
	c.mu.Lock()
	c.recipients[chains.Name(p.Chain)] = append(c.recipients[chains.Name(p.Chain)], in.Address)
	c.mu.Unlock()
	c.t.Logf("step %d: refund %s of %s on %s (after payout %v)", c.steps, what, p.ExternalID, p.Chain, afterPayout)
}

// run plays the scenario with the killer running, then lets a last worker
// finish and checks the books.
func (c *chaos) run() {
	c.worker = c.startWorker()
	stopKiller, abortKiller := c.killer()
	defer abortKiller() // a step that failed ends the test: the killer first

	// Every kind of payment on each chain, sends on each chain, one
	// session paid on both, and a few more of any kind, in a random order;
	// top-ups, repeats and refunds are mixed in as the run goes.
	var plan []func()
	for _, chain := range chaosChains {
		on := func(f func(chains.Name)) func() { return func() { f(chain) } }
		plan = append(plan, on(c.payExact), on(c.payUnder), on(c.payOver), on(c.payLate), on(c.agentSend), on(c.agentSend))
	}
	plan = append(plan, c.payTwoChains)
	kinds := []func(chains.Name){c.payExact, c.payUnder, c.payOver, c.payLate, c.agentSend}
	for range 2 + c.rng.IntN(6) {
		f := kinds[c.rng.IntN(len(kinds))]
		plan = append(plan, func() { f(c.chain()) })
	}
	c.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	for i, step := range plan {
		c.steps++
		step()
		if len(c.topUps) > 0 && c.rng.IntN(2) == 0 {
			c.steps++
			c.topUp()
		}
		if len(c.paid) > 0 && c.rng.IntN(6) == 0 {
			c.steps++
			c.payRepeat()
		}
		if i > len(plan)/3 && c.rng.IntN(3) == 0 {
			c.steps++
			c.refund(c.rng.IntN(2) == 0)
		}
		time.Sleep(time.Duration(c.rng.IntN(300)) * time.Millisecond)
	}
	for len(c.topUps) > 0 {
		c.topUp()
	}
	// Refunds after payouts the kills may have delayed: wait for one
	// payout, refund a payment after its payout from the merchant's next
	// payment while it is unsettled, then refund twice more.
	c.waitFor(90*time.Second, "a first payout", func() bool {
		return c.h.db.Ent.SettlementBatch.Query().Where(settlementbatch.StatusEQ(settlementbatch.StatusCompleted)).ExistX(c.ctx)
	})
	c.steps++
	c.refundFromUnsettled()
	for _, after := range []bool{true, false, c.rng.IntN(2) == 0} {
		c.steps++
		c.refund(after)
	}
	stopKiller()

	c.drain()
	c.t.Logf("jobs run more than once (interrupted by a kill, or retried): %s", c.rerunJobs())
	c.t.Logf("records: %s", c.summary())
	c.stop(c.worker, killSoft)
	for _, cw := range c.dead {
		select {
		case <-cw.done:
		case <-time.After(40 * time.Second):
			c.t.Error("chaos: a dead worker's goroutines did not end")
		}
	}
	c.checkServiceBooks()
	c.checkBooks()
	c.checkNobodyReceivedMore()
}

// refundFromUnsettled refunds a payment after its payout from its
// merchant's next payment on the chain: pays a session of a merchant of
// at least the batch minimum (paid out at once) and waits for its payout,
// then pays another below the minimum (its batch waits the interval) and,
// once it is confirmed and in no batch, refunds the paid-out payment by up
// to the new payment's net. The batch may still take the new payment first
// (the refund is then refused, saying nothing is available): tried a few
// times, and one must succeed.
func (c *chaos) refundFromUnsettled() {
	c.t.Helper()
	m, chain := c.merchant(), c.chain()
	// Whole cents from 8.00 (the batch minimum) to 15.99.
	cents := int64(800 + c.rng.IntN(800))
	sess, ds := c.session(m, decimal.New(cents, -2), chain)
	c.pay(ds[0], cents*10_000)
	var p *ent.Payment
	c.waitFor(90*time.Second, "a payment paid out", func() bool {
		p, _ = c.h.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).WithSession().Only(c.ctx)
		return p != nil && p.SettlementStatus != nil && *p.SettlementStatus == payment.SettlementStatusCompleted
	})
	c.t.Logf("step %d: %s on %s paid out (%s)", c.steps, decimal.New(cents, -2), chain, p.ExternalID)
	for attempt := 1; attempt <= 5; attempt++ {
		cents := int64(100 + c.rng.IntN(500)) // 1.00 to 5.99: below the batch minimum
		sess, ds := c.session(m, decimal.New(cents, -2), chain)
		c.pay(ds[0], cents*10_000)
		var next *ent.Payment
		c.waitFor(90*time.Second, "the next payment confirmed", func() bool {
			next, _ = c.h.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Only(c.ctx)
			return next != nil && next.Status == payment.StatusConfirmed && next.SettlementStatus != nil
		})
		if next.SettlementBatchID != nil || next.SettlementNet == nil {
			c.t.Logf("step %d: refund from unsettled: payment %s already in a batch (attempt %d)", c.steps, next.ExternalID, attempt)
			continue
		}
		units := min(p.AmountToken, *next.SettlementNet)
		amount := decimal.New(units, -6)
		in := agentpay.RefundInput{PaymentID: p.ExternalID, AmountUSD: &amount, Address: c.freshAddress(chain), Reason: "chaos, after payout"}
		out, err := c.h.svc.CreateRefund(c.ctx, m.auth, p.Edges.Session.ExternalID, in)
		if err != nil {
			require.True(c.t, agentpay.IsValidation(err) || errors.Is(err, agentpay.ErrConflict), "%v", err)
			c.t.Logf("step %d: refund from unsettled of %s refused (attempt %d): %v", c.steps, p.ExternalID, attempt, err)
			continue
		}
		require.True(c.t, out.Refund.AfterPayout)
		require.Positive(c.t, out.Refund.ReservedToken, "paid from the unsettled payment")
		c.mu.Lock()
		c.recipients[chain] = append(c.recipients[chain], in.Address)
		c.mu.Unlock()
		c.t.Logf("step %d: refund %s of %s on %s after its payout, from %s unsettled", c.steps, amount, p.ExternalID, chain, next.ExternalID)
		return
	}
	c.t.Fatalf("chaos: no refund after a payout succeeded in 5 attempts\n%s", c.state())
}

// checkNobodyReceivedMore checks, per merchant and paid chain, that what
// its payments brought in is exactly what went out for them or stayed:
// its payouts, the fees, the completed refunds (to anyone: the payers or
// the merchant's own addresses), and what its held payments keep in the
// treasury; and that no batch left a deficit for the treasury to carry.
// A refund advanced by the treasury would make the outflow exceed the
// inflow.
func (c *chaos) checkNobodyReceivedMore() {
	t, ctx, db := c.t, c.ctx, c.h.db.Ent
	for _, m := range c.merchants {
		for _, chain := range chaosChains {
			var in, held, payouts, fees, refunded, carried int64
			for _, p := range db.Payment.Query().Where(payment.Chain(string(chain)),
				payment.HasSessionWith(checkoutsession.MerchantID(m.auth.Merchant.ID))).AllX(ctx) {
				require.Equal(t, payment.StatusConfirmed, p.Status)
				in += p.AmountToken
				if p.SettlementStatus == nil {
					held += p.AmountToken - p.RefundedToken
				}
			}
			bs := db.SettlementBatch.Query().Where(settlementbatch.MerchantID(m.auth.Merchant.ID), settlementbatch.Chain(string(chain))).
				Order(ent.Asc(settlementbatch.FieldSeq)).AllX(ctx)
			for _, b := range bs {
				require.Equal(t, settlementbatch.StatusCompleted, b.Status)
				payouts += b.Net
				fees += b.Fee
				carried = b.CarriedOut
			}
			for _, r := range db.Refund.Query().Where(refund.MerchantID(m.auth.Merchant.ID), refund.Chain(string(chain))).AllX(ctx) {
				require.Equal(t, refund.StatusCompleted, r.Status)
				refunded += r.AmountToken
				if r.ReservedToken > 0 {
					require.NotNil(t, r.NettedBatchID, "refund %s's reservation netted", r.ExternalID)
				}
			}
			require.Zero(t, carried, "%s %s: the last batch carries no deficit", m.auth.Merchant.Name, chain)
			require.Equal(t, in, payouts+fees+refunded+held,
				"%s %s: paid in = payouts %d + fees %d + refunds %d + held %d", m.auth.Merchant.Name, chain, payouts, fees, refunded, held)
			c.t.Logf("%s on %s: paid in %d = payouts %d + fees %d + refunds %d + held %d", m.auth.Merchant.Name, chain, in, payouts, fees, refunded, held)
		}
	}
}

// waitFor polls done every 250 ms until it holds or timeout passes.
func (c *chaos) waitFor(timeout time.Duration, what string, done func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			c.t.Fatalf("chaos: waited %s for %s\n%s", timeout, what, c.state())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// drain waits until everything the scenario started has finished: every
// payment scanned, confirmed and swept, every counted one paid out, every
// batch, refund and transfer final.
func (c *chaos) drain() {
	c.t.Helper()
	c.waitFor(3*time.Minute, "the worker to finish", func() bool { return c.unfinished() == "" })
}

// unfinished says what is not final yet; "" when all is.
func (c *chaos) unfinished() string {
	ctx, db := c.ctx, c.h.db.Ent
	ps := db.Payment.Query().AllX(ctx)
	c.mu.Lock()
	want := c.deposits
	c.mu.Unlock()
	if len(ps) != want {
		return fmt.Sprintf("%d payments recorded of %d sent", len(ps), want)
	}
	for _, p := range ps {
		switch {
		case p.Status != payment.StatusConfirmed:
			return fmt.Sprintf("payment %s %s", p.ExternalID, p.Status)
		case p.SweptAt == nil:
			return fmt.Sprintf("payment %s not swept", p.ExternalID)
		case p.SettlementStatus != nil && *p.SettlementStatus != payment.SettlementStatusCompleted && *p.SettlementStatus != payment.SettlementStatusSkipped:
			return fmt.Sprintf("payment %s settlement %s (%s)", p.ExternalID, *p.SettlementStatus, p.SettlementError)
		}
	}
	if b := db.SettlementBatch.Query().Where(settlementbatch.StatusNEQ(settlementbatch.StatusCompleted)).FirstX(ctx); b != nil {
		return fmt.Sprintf("batch %s %s (%s)", b.ExternalID, b.Status, b.Error)
	}
	if r := db.Refund.Query().Where(refund.StatusIn(refund.StatusPending, refund.StatusSubmitted)).FirstX(ctx); r != nil {
		return fmt.Sprintf("refund %s %s (%s)", r.ExternalID, r.Status, r.Error)
	}
	if tr := db.Transfer.Query().Where(transfer.StatusIn(transfer.StatusPending, transfer.StatusSubmitted)).FirstX(ctx); tr != nil {
		return fmt.Sprintf("transfer %s %s (%s)", tr.ID, tr.Status, tr.Error)
	}
	return ""
}

// summary counts the records the run made, by kind.
func (c *chaos) summary() string {
	ctx, db := c.ctx, c.h.db.Ent
	ps := db.Payment.Query().AllX(ctx)
	var late, held, counted int
	for _, p := range ps {
		switch {
		case p.Late:
			late++
		case p.SettlementStatus == nil:
			held++
		default:
			counted++
		}
	}
	rs := db.Refund.Query().AllX(ctx)
	var after, full int
	for _, r := range rs {
		if r.AfterPayout {
			after++
		}
	}
	for _, p := range ps {
		if p.RefundedToken == p.AmountToken {
			full++
		}
	}
	return fmt.Sprintf("%d payments (%d counted, %d late or repeated, %d other held), %d batches, %d refunds (%d after the payout; %d payments refunded in full), %d sends",
		len(ps), counted, late, held, db.SettlementBatch.Query().CountX(ctx), len(rs), after, full, db.Transfer.Query().CountX(ctx))
}

// rerunJobs counts the jobs, by kind, that ran more than once.
func (c *chaos) rerunJobs() string {
	rows, err := c.h.db.SQL.QueryContext(c.ctx, `SELECT kind, COUNT(*) FROM river_job WHERE attempt > 1 GROUP BY kind ORDER BY kind`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kind string
		var n int
		if rows.Scan(&kind, &n) == nil {
			out = append(out, fmt.Sprintf("%s %d", kind, n))
		}
	}
	return strings.Join(out, ", ")
}

// state describes the records and River's unfinished jobs, for a failure.
func (c *chaos) state() string {
	var b strings.Builder
	fmt.Fprintf(&b, "unfinished: %s\n", c.unfinished())
	rows, err := c.h.db.SQL.QueryContext(c.ctx, `SELECT kind, state, attempt, COALESCE(CAST(errors AS TEXT), '') FROM river_job WHERE state NOT IN ('completed', 'cancelled') ORDER BY id`)
	if err == nil {
		defer rows.Close()
		for rows.Next() {
			var kind, state, errs string
			var attempt int
			if rows.Scan(&kind, &state, &attempt, &errs) == nil {
				fmt.Fprintf(&b, "job %s %s attempt %d %.300s\n", kind, state, attempt, errs)
			}
		}
	}
	return b.String()
}

// checkServiceBooks checks the service's own books (agentpay.Service.Books:
// every holder's balance against its records, to the base unit, on every
// devnet) and logs them whole when they do not balance.
func (c *chaos) checkServiceBooks() {
	c.t.Helper()
	books, err := c.h.svc.Books(c.ctx)
	require.NoError(c.t, err)
	var b strings.Builder
	for _, cb := range books.Chains {
		for _, l := range cb.Lines {
			fmt.Fprintf(&b, "  %s %s %-18s %3d addresses  on chain %12s  records %12s\n", cb.Mode, cb.Chain, l.Holder, l.Addresses, l.OnChain, l.Records)
			for _, d := range l.Differences {
				why := "no record explains it"
				if d.Explained != nil {
					why = d.Explained.String()
				}
				fmt.Fprintf(&b, "      %s %s: on chain %s, records %s: %s\n", d.Address, d.Owner, d.OnChain, d.Records, why)
			}
			for _, r := range l.InFlight {
				fmt.Fprintf(&b, "      %s\n", r)
			}
		}
	}
	if err := books.Err(); err != nil {
		c.t.Fatalf("%v\nthe books:\n%s", err, b.String())
	}
	c.t.Logf("the service's books balance:\n%s", b.String())
}

// checkBooks checks each devnet to the base unit against what the test
// sent and what the records say was paid.
func (c *chaos) checkBooks() {
	t, ctx, db := c.t, c.ctx, c.h.db.Ent
	for _, chain := range chaosChains {
		balance := func(address string) int64 { return c.env.Balance(t, chain, address).Int64() }
		treasury := c.env.Treasury.Address(chain)
		tracked := map[string]bool{treasury: true}
		var lines []string
		line := func(who, address string, got int64) {
			lines = append(lines, fmt.Sprintf("  %-28s %-46s %d", who, address, got))
		}

		// Deposit addresses: all emptied into the treasury.
		for _, d := range db.DepositAddress.Query().Where(depositaddress.Chain(string(chain))).AllX(ctx) {
			tracked[d.Address] = true
			require.Zero(t, balance(d.Address), "%s: deposit address %s not emptied", chain, d.Address)
		}
		// Agent wallets: tracked (the transfers' records are the books').
		for _, w := range db.Wallet.Query().Where(wallet.Chain(string(chain))).AllX(ctx) {
			tracked[w.Address] = true
			line("wallet", w.Address, balance(w.Address))
		}
		// Merchants: exactly the nets of their completed batches paid on
		// this chain.
		for _, m := range c.merchants {
			var want int64
			for _, b := range db.SettlementBatch.Query().Where(
				settlementbatch.StatusEQ(settlementbatch.StatusCompleted),
				settlementbatch.PayoutChain(string(chain)),
				settlementbatch.PayoutAddress(m.address),
			).AllX(ctx) {
				want += b.Net
			}
			if m.chain == chain {
				tracked[m.address] = true
				line("merchant settlement", m.address, balance(m.address))
				require.Equal(t, want, balance(m.address), "%s: merchant %s holds the nets of its completed batches", chain, m.address)
			} else {
				require.Zero(t, want, "%s: merchant paid out on %s", chain, m.chain)
			}
		}
		// Refund recipients: exactly their completed refunds.
		refunded := map[string]int64{}
		var refundedAll int64
		for _, r := range db.Refund.Query().Where(refund.Chain(string(chain))).AllX(ctx) {
			require.Equal(t, refund.StatusCompleted, r.Status, "%s: refund %s: %s", chain, r.ExternalID, r.Error)
			refunded[r.ToAddress] += r.AmountToken
			refundedAll += r.AmountToken
		}
		c.mu.Lock()
		recipients := append([]string(nil), c.recipients[chain]...)
		c.mu.Unlock()
		for _, a := range recipients {
			refunded[a] += 0
		}
		for a, want := range refunded {
			tracked[a] = true
			line("refund recipient", a, balance(a))
			require.Equal(t, want, balance(a), "%s: refund recipient %s holds its completed refunds", chain, a)
		}

		// The treasury: what it was funded, every payment swept in, the
		// send fees, less the payouts and refunds it sent.
		var swept, payouts, fees int64
		for _, p := range db.Payment.Query().Where(payment.Chain(string(chain))).AllX(ctx) {
			swept += p.AmountToken
		}
		for _, b := range db.SettlementBatch.Query().Where(settlementbatch.StatusEQ(settlementbatch.StatusCompleted), settlementbatch.PayoutChain(string(chain))).AllX(ctx) {
			payouts += b.Net
		}
		for _, tr := range db.Transfer.Query().Where(transfer.Chain(string(chain)), transfer.StatusEQ(transfer.StatusCompleted)).AllX(ctx) {
			fees += tr.Fee
		}
		c.mu.Lock()
		funded, initial := c.funded[chain], c.initial[chain]
		c.mu.Unlock()
		line("treasury", treasury, balance(treasury))

		// Nothing created or lost: the tracked addresses hold what they
		// held plus what the faucet sent them.
		var total int64
		addrs := make([]string, 0, len(tracked))
		for a := range tracked {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		for _, a := range addrs {
			total += balance(a)
		}
		sort.Strings(lines)
		table := strings.Join(lines, "\n")
		require.Equal(t, initial+funded, total, "%s: the tracked addresses hold what the faucet sent them\n%s", chain, table)
		wantTreasury := initial + chaosLiquidity + swept + fees - payouts - refundedAll
		require.Equal(t, wantTreasury, balance(treasury), "%s: treasury = funded %d + swept %d + send fees %d - payouts %d - refunds %d\n%s",
			chain, chaosLiquidity, swept, fees, payouts, refundedAll, table)
		t.Logf("%s balanced: %d base units in %d addresses, treasury %d (swept %d, send fees %d, payouts %d, refunds %d)",
			chain, total, len(tracked), balance(treasury), swept, fees, payouts, refundedAll)
	}
}

// chaosWorker is one worker "process" of the chaos test.
type chaosWorker struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan error
	// started is closed once River's client has started, exited once Run
	// has returned.
	started, exited chan struct{}
	// soft is closed when the worker is stopped softly: a job waiting
	// for its crash goes on instead.
	soft chan struct{}
	// db is the worker's own pool (its service's too), as a process of
	// its own has.
	db *store.DB
}

// startWorker starts a worker with a service of its own, whose test
// networks' ledgers may crash it right after a broadcast (crashLedger),
// and a pool of its own, so it can die as a process does.
func (c *chaos) startWorker() *chaosWorker {
	c.t.Helper()
	cw := &chaosWorker{done: make(chan error, 1), soft: make(chan struct{}), started: make(chan struct{}), exited: make(chan struct{})}
	cfg := c.cfg
	cw.db = testdb.Reopen(c.t, cfg.DB)
	cfg.DB = cw.db
	cfg.Test = chains.Networks{}
	for name, n := range c.cfg.Test {
		n.Ledger = c.crashLedger(cw, n.Ledger)
		cfg.Test[name] = n
	}
	svc, err := agentpay.NewService(cfg)
	require.NoError(c.t, err)
	cw.w, err = New(Config{
		DB: cfg.DB, Service: svc, Logger: c.env.Logger, ScanInterval: 200 * time.Millisecond,
		Observer: &startObserver{started: cw.started},
	})
	require.NoError(c.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cw.cancel = cancel
	go func() {
		defer close(cw.exited)
		cw.done <- cw.w.Run(ctx)
	}()
	return cw
}

// startObserver closes started at the first queue sample, which Run takes
// once River's client has started.
type startObserver struct {
	started chan struct{}
	once    sync.Once
}

func (o *startObserver) QueueDepth(map[[2]string]int) { o.once.Do(func() { close(o.started) }) }

func (*startObserver) JobWorked(string, string, time.Duration, time.Duration) {}
func (*startObserver) Scanned(string, string, uint64, uint64, int)            {}
func (*startObserver) ScanFailed(string, string)                              {}
func (*startObserver) WebhookAttempt(string, string, time.Duration)           {}

// stopAndCancel is River's hard stop, once the client has started (River
// does not take it while Start is under way); nothing if Run ended first.
func (cw *chaosWorker) stopAndCancel() error {
	select {
	case <-cw.started:
	case <-cw.exited:
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("the worker did not start within 30 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cw.w.client.StopAndCancel(ctx)
}

// crashLedger wraps a devnet's ledger so that a worker's broadcast may be
// the last thing it does: after the node took the transaction, the
// worker dies (killDead) before the caller
// hears of it, so the hash is never recorded, the window the legs'
// references are for (chainlegs.go). The wrapper keeps every optional
// interface of the ledger the service looks for.
func (c *chaos) crashLedger(cw *chaosWorker, l chains.Ledger) chains.Ledger {
	c.t.Helper()
	switch l := l.(type) {
	case chaosEVMLedger:
		return &crashingEVM{chaosEVMLedger: l, crash: func(ctx context.Context, what string) { c.crashAfterBroadcast(ctx, cw, what) }}
	case chaosSolanaLedger:
		return &crashingSolana{chaosSolanaLedger: l, crash: func(ctx context.Context, what string) { c.crashAfterBroadcast(ctx, cw, what) }}
	}
	c.t.Fatalf("chaos: a %T ledger has not the interfaces the chaos test keeps", l)
	return nil
}

// The devnets' ledgers, with the optional interfaces the service asserts.
type (
	chaosEVMLedger interface {
		chains.Ledger
		chains.DepositReader
		chains.AuthorizationRelayer
		chains.CostReader
		chains.FeeReader
		ChainID() uint64
	}
	chaosSolanaLedger interface {
		chains.Ledger
		chains.DepositReader
		chains.CostReader
		chains.FeeReader
		chains.TokenAccountCloser
	}
)

// chaosCrash is a worker's request to die right after a broadcast.
type chaosCrash struct {
	worker *chaosWorker
	// what was broadcast, for the log.
	what string
}

type crashingEVM struct {
	chaosEVMLedger
	crash func(context.Context, string)
}

func (l *crashingEVM) Transfer(ctx context.Context, req chains.TransferRequest) (chains.Submitted, error) {
	sub, err := l.chaosEVMLedger.Transfer(ctx, req)
	if err == nil {
		l.crash(ctx, fmt.Sprintf("%s to %s", req.Amount, req.To))
	}
	return sub, err
}

type crashingSolana struct {
	chaosSolanaLedger
	crash func(context.Context, string)
}

func (l *crashingSolana) Transfer(ctx context.Context, req chains.TransferRequest) (chains.Submitted, error) {
	sub, err := l.chaosSolanaLedger.Transfer(ctx, req)
	if err == nil {
		l.crash(ctx, fmt.Sprintf("%s to %s", req.Amount, req.To))
	}
	return sub, err
}

// crashAfterBroadcast decides (crashRng, one broadcast in three, while the
// killer runs) whether cw dies right after a broadcast. If so it asks the
// killer to kill cw and waits until the job is cancelled, so the caller
// records nothing.
func (c *chaos) crashAfterBroadcast(ctx context.Context, cw *chaosWorker, what string) {
	c.crashMu.Lock()
	crashes := c.crashes
	crash := crashes != nil && c.crashRng.IntN(3) == 0
	c.crashMu.Unlock()
	if !crash {
		return
	}
	select {
	case crashes <- chaosCrash{cw, what}:
	default:
		return // a kill is already asked for
	}
	select {
	case <-ctx.Done():
	case <-cw.soft:
	case <-time.After(30 * time.Second):
	}
}

// The ways a worker ends.
type chaosKill int

const (
	// killSoft: running jobs finish first (a deploy).
	killSoft chaosKill = iota
	// killHard: running jobs' contexts are cancelled wherever they are
	// (between a broadcast and its record, say); River records them as
	// interrupted and runs them again.
	killHard
	// killDead: the process dies. Its connections end at once, so
	// nothing more is recorded, neither by its jobs nor by River: its
	// jobs are left running until a live worker finds its liveness lock
	// free (liveness.go, PostgreSQL) or River's rescuer (SQLite; the test
	// does at once what it does after 90 s) hands them out again. The next
	// worker starts without waiting for anything of the dead one.
	killDead
)

func (k chaosKill) String() string { return [...]string{"soft", "hard", "dead"}[k] }

// stop ends the worker the way kill says. A dead worker is left to wind
// down on its own (c.dead).
func (c *chaos) stop(cw *chaosWorker, kill chaosKill) {
	t := c.t
	switch kill {
	case killDead:
		// Its connections go: first the pool, so nothing more is
		// recorded (new queries fail at once), then its liveness lock's
		// (PostgreSQL); then its goroutines are told to end.
		cw.cancel()
		var pids []int
		if c.h.db.IsPostgres() {
			rows, err := c.h.db.SQL.QueryContext(c.ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
				AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $1`, livenessKey(cw.w.live.id))
			if err == nil {
				for rows.Next() {
					var pid int
					if rows.Scan(&pid) == nil {
						pids = append(pids, pid)
					}
				}
				rows.Close()
			}
			if len(pids) > 1 {
				// 0 is a worker killed before it took its lock.
				t.Errorf("chaos: the dead worker held %d liveness locks", len(pids))
			}
		}
		closed := make(chan struct{})
		go func() { _ = cw.db.SQL.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(2 * time.Second): // closed to new queries already
		}
		for _, pid := range pids {
			_, _ = c.h.db.SQL.ExecContext(c.ctx, `SELECT pg_terminate_backend($1)`, pid)
		}
		go func() { _ = cw.stopAndCancel() }()
		c.dead = append(c.dead, cw)
		if !c.h.db.IsPostgres() {
			// On SQLite no liveness lock tells that the process died:
			// River's rescuer hands its jobs out again after
			// RescueStuckJobsAfter (90 s), and its leadership lapses.
			// Done here at once, as the rescuer would, so the test does
			// not wait.
			_, err := c.h.db.SQL.ExecContext(c.ctx, `UPDATE river_job SET state = 'available' WHERE state = 'running'`)
			require.NoError(t, err)
			_, err = c.h.db.SQL.ExecContext(c.ctx, `DELETE FROM river_leader`)
			require.NoError(t, err)
		}
		return
	case killSoft:
		close(cw.soft)
	case killHard:
		if err := cw.stopAndCancel(); err != nil {
			t.Logf("chaos: stop and cancel: %v", err)
		}
	}
	cw.cancel()
	select {
	case err := <-cw.done:
		if err != nil {
			t.Logf("chaos: stopped worker: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Error("chaos: worker did not stop")
	}
	_ = cw.db.SQL.Close()
}

// legInFlight waits up to timeout for an on-chain leg to be in flight (a
// payout, a refund, a sweep or a send marked as about to be broadcast, or
// broadcast, and not yet recorded as included), and reports whether one is.
func (c *chaos) legInFlight(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		err := c.h.db.SQL.QueryRowContext(c.ctx, `SELECT
			(SELECT COUNT(*) FROM settlement_batches WHERE status = 'submitted') +
			(SELECT COUNT(*) FROM refunds WHERE status = 'submitted') +
			(SELECT COUNT(*) FROM payments WHERE sweep_submitted_at IS NOT NULL AND swept_at IS NULL) +
			(SELECT COUNT(*) FROM transfers WHERE status = 'submitted')`).Scan(&n)
		if err == nil && n > 0 {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// kill picks how the next kill ends the worker: one in five soft, two in
// five dead, the rest hard.
func (c *chaos) kill() chaosKill {
	switch r := c.killRng.IntN(10); {
	case r < 2:
		return killSoft
	case r < 6:
		return killDead
	default:
		return killHard
	}
}

// named replaces the addresses the test knows in what with their names.
func (c *chaos) named(what string) string {
	for i, m := range c.merchants {
		what = strings.ReplaceAll(what, m.address, fmt.Sprintf("merchant %d (payout)", i))
	}
	for _, chain := range chaosChains {
		what = strings.ReplaceAll(what, c.env.Treasury.Address(chain), "the treasury")
	}
	return what
}

// killer kills the worker and starts a new one (sometimes after a
// pause) until stopped, and at least kills times (killRng: 6 to 12), so
// the kills also fall on the settlements, sweeps and refunds that follow
// the payments. Each kill comes 0.15 to 1.5 s after the last, or (half
// of them, "aimed") 0 to 50 ms after an on-chain leg was seen in flight
// (legInFlight), or at once when a worker's broadcast asks for its crash
// (crashAfterBroadcast: dead). Stopping it
// kills once more and starts the worker that finishes the test, which
// never crashes. abort, for a test that failed, stops it at once and
// waits until it has (it uses the test's T, which must not outlive it).
func (c *chaos) killer() (stop, abort func()) {
	quit, aborted, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	least := 6 + c.killRng.IntN(7)
	c.crashMu.Lock()
	c.crashes = make(chan chaosCrash, 1)
	c.crashMu.Unlock()
	go func() {
		defer close(done)
		for {
			wait := time.Duration(150+c.killRng.IntN(1350)) * time.Millisecond
			aimed := c.killRng.IntN(2) == 0
			after := time.Duration(c.killRng.IntN(50)) * time.Millisecond
			kill := c.kill()
			pause := time.Duration(c.killRng.IntN(500)) * time.Millisecond
			select {
			case <-aborted:
				return
			case <-quit:
				if c.kills >= least {
					return
				}
			default:
			}
			if aimed {
				wait = after
				if !c.legInFlight(3 * time.Second) {
					wait = 0
				}
			}
			how := fmt.Sprintf("aimed %v", aimed)
			select {
			case <-aborted:
				return
			case <-time.After(wait):
			case crash := <-c.crashes:
				if crash.worker != c.worker {
					continue // killed already
				}
				how, kill = "right after broadcasting "+c.named(crash.what), killDead
			}
			t0 := time.Now()
			c.stop(c.worker, kill)
			c.kills++
			t1 := time.Now()
			time.Sleep(pause)
			c.worker = c.startWorker()
			c.t.Logf("kill %d: %s, %s (stopped in %s, started in %s)", c.kills, kill, how, t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
		}
	}()
	var once sync.Once
	abort = func() { once.Do(func() { close(aborted) }); <-done }
	return func() {
		close(quit)
		<-done
		c.crashMu.Lock()
		c.crashes = nil
		c.crashMu.Unlock()
		kill := c.kill()
		c.stop(c.worker, kill)
		c.kills++
		c.t.Logf("kill %d (last): %s", c.kills, kill)
		c.worker = c.startWorker()
	}, abort
}
