package agentpay

import (
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
)

// TestMayTakeSession: who may take a session for a payment while others
// pay it (mayTakeSession): the customer always (every address stays
// watched); an agent or a relay never while an agent pays; an agent not
// while a relay is in flight; a relay beside another relay on its chain,
// not beside one on another chain; a Solana transaction not beside
// another in flight.
func TestMayTakeSession(t *testing.T) {
	sess := &ent.CheckoutSession{ExternalID: "cs_test_x"}
	const (
		ok            = ""
		byAgent       = "conflict: session cs_test_x is already being paid by an agent"
		byRelaying    = "conflict: session cs_test_x is already being paid by a relayed authorization"
		byTransaction = "conflict: session cs_test_x is already being paid by another transaction in flight; retry the same payment (or under its payment-identifier or Idempotency-Key) to learn its outcome, and sign a new one only if it failed"
		onSolana      = "conflict: session cs_test_x is already being paid on solana by a payment in flight; a payment on another chain is refused until that one is decided (paid, failed or expired): retry it then, or ask the session's status"
		onBase        = "conflict: session cs_test_x is already being paid on base by a payment in flight; a payment on another chain is refused until that one is decided (paid, failed or expired): retry it then, or ask the session's status"
	)
	solana := paymentsUnderWay{relay: true, elsewhere: chains.Solana}
	base := paymentsUnderWay{relay: true, elsewhere: chains.Base}
	for _, tc := range []struct {
		payer sessionPayer
		under paymentsUnderWay
		want  string
	}{
		{payerCustomer, paymentsUnderWay{}, ok},
		{payerCustomer, paymentsUnderWay{agent: true}, ok},
		{payerCustomer, paymentsUnderWay{relay: true}, ok},
		{payerCustomer, paymentsUnderWay{agent: true, relay: true}, ok},
		{payerAgent, paymentsUnderWay{}, ok},
		{payerAgent, paymentsUnderWay{agent: true}, byAgent},
		{payerAgent, paymentsUnderWay{relay: true}, byRelaying},
		{payerAgent, paymentsUnderWay{agent: true, relay: true}, byAgent},
		{payerRelay, paymentsUnderWay{}, ok},
		{payerRelay, paymentsUnderWay{agent: true}, byAgent},
		{payerRelay, paymentsUnderWay{relay: true}, ok},
		{payerRelay, paymentsUnderWay{agent: true, relay: true}, byAgent},
		{payerSolana, paymentsUnderWay{}, ok},
		{payerSolana, paymentsUnderWay{agent: true}, byAgent},
		{payerSolana, paymentsUnderWay{relay: true}, byTransaction},
		{payerSolana, paymentsUnderWay{agent: true, relay: true}, byAgent},
		// A payment in flight on another chain than the taker's.
		{payerCustomer, solana, ok},
		{payerAgent, solana, byRelaying},
		{payerRelay, solana, onSolana},
		{payerRelay, base, onBase},
		{payerSolana, base, onBase},
		{payerRelay, paymentsUnderWay{agent: true, relay: true, elsewhere: chains.Solana}, byAgent},
	} {
		err := mayTakeSession(tc.payer, sess, tc.under)
		if tc.want == ok {
			require.NoError(t, err, "%s %+v", tc.payer, tc.under)
			continue
		}
		require.ErrorIs(t, err, ErrConflict, "%s %+v", tc.payer, tc.under)
		require.EqualError(t, err, tc.want, "%s %+v", tc.payer, tc.under)
	}
}
