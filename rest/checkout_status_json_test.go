package rest

import (
	"encoding/json"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/httpx"
)

// The hand-written status encoding is byte for byte what writeJSON writes
// for checkoutStatusResponse.
func TestAppendCheckoutStatusMatchesEncodingJSON(t *testing.T) {
	three := uint64(3)
	ten := decimal.New(10, 0)
	for _, st := range []agentpay.CheckoutStatus{
		{Status: checkoutsession.StatusPending, AmountPaid: decimal.Zero},
		{Status: checkoutsession.StatusDetecting, AmountPaid: decimal.New(0, -6), Chain: "base", Token: "USDC", Required: &three},
		{Status: checkoutsession.StatusDetecting, AmountPaid: decimal.New(4, 0), Chain: "base", Token: "USDC", Required: &three, Amount: ten},
		{Status: checkoutsession.StatusConfirming, AmountPaid: decimal.New(12340000, -6), Chain: "base", Token: "USDC", Confirmations: 2, Required: &three, Amount: ten},
		{Status: "odd \"<&>\" \u2028 é", AmountPaid: decimal.RequireFromString("1000000.000001"), Chain: "sol\\ana", Token: "\x01"},
	} {
		st.Progress = agentpay.ProgressOf(st.Status, st.Amount, st.AmountPaid)
		want, err := json.Marshal(checkoutStatusResponse{
			Status:                string(st.Status),
			AmountPaid:            httpx.Amount{Decimal: st.AmountPaid},
			Chain:                 checkoutNullable(st.Chain),
			Token:                 checkoutNullable(st.Token),
			Confirmations:         st.Confirmations,
			ConfirmationsRequired: st.Required,
			State:                 string(st.Progress.State),
			AmountDue:             httpx.Amount{Decimal: st.Progress.Due},
			AmountExcess:          httpx.Amount{Decimal: st.Progress.Excess},
		})
		require.NoError(t, err)
		require.Equal(t, string(want)+"\n", string(appendCheckoutStatus(nil, &st)))
	}
}
