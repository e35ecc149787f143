package agentpay

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/internal/testenv"
)

// recordingObserver keeps what the service reported.
type recordingObserver struct {
	mu    sync.Mutex
	sends []string // chain/status
	// refunds are mode/chain/amount
	refunds []string
	gas     map[string][]*big.Int
	dec     map[string]int32
}

func newRecordingObserver() *recordingObserver {
	return &recordingObserver{gas: map[string][]*big.Int{}, dec: map[string]int32{}}
}

func (o *recordingObserver) PaymentStatus(string, string, string)            {}
func (o *recordingObserver) Settled(string, string, string, decimal.Decimal) {}
func (o *recordingObserver) Swept(string, string, decimal.Decimal)           {}
func (o *recordingObserver) Refunded(mode, chain string, amount decimal.Decimal) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refunds = append(o.refunds, mode+"/"+chain+"/"+amount.String())
}
func (o *recordingObserver) SendStatus(chain, status string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sends = append(o.sends, chain+"/"+status)
}
func (o *recordingObserver) GasSpent(mode, chain string, fee *big.Int, decimals int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gas[mode+"/"+chain] = append(o.gas[mode+"/"+chain], fee)
	o.dec[chain] = decimals
}

// TestSendReportsStatusAndGas: a completed send is reported requested
// (pending) then completed, and the fees the treasury paid for its two
// legs (payment and fee) are read from the chain once, in wei and
// lamports.
func TestSendReportsStatusAndGas(t *testing.T) {
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}, BlockTime: 50 * time.Millisecond})
	obs := newRecordingObserver()
	e := &sendEnv{env: env, svc: newTestService(t, env, Config{AgentMode: ModeTest, Observer: obs}), db: env.DB}
	for _, c := range []chains.Name{chains.Base, chains.Solana} {
		alice, bob := e.register(t, "alice"), e.register(t, "bob")
		e.fund(t, alice, c, "10")
		res, _, err := e.svc.Send(context.Background(), alice, SendRequest{ToUsername: bob.Username, AmountUSD: dec("5"), Chain: string(c)})
		require.NoError(t, err)
		require.Equal(t, "completed", res.Status)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, []string{"base/pending", "base/completed", "solana/pending", "solana/completed"}, obs.sends)
	for _, c := range []string{"base", "solana"} {
		fees := obs.gas["test/"+c]
		require.Len(t, fees, 2, "the payment leg and the fee leg on %s", c)
		for _, f := range fees {
			require.Positive(t, f.Sign(), c)
		}
	}
	require.EqualValues(t, 18, obs.dec["base"])
	require.EqualValues(t, 9, obs.dec["solana"])
}
