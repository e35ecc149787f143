package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
)

// TestCheckoutPageLongNameAndDescription: the longest name and description
// a merchant may set (200 characters of emoji; 1,000 characters with
// spaces, about 3 KB once percent-encoded) still give a Solana Pay request
// that fits a scannable QR code: the wallet text is cut, with an ellipsis,
// and the page answers 200, not 500.
func TestCheckoutPageLongNameAndDescription(t *testing.T) {
	h := newHarness(t, true)
	ctx := context.Background()
	name, email := strings.Repeat("😀", agentpay.MerchantNameMaxLen), "shop@example.com"
	reg, err := h.svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	description := strings.Repeat("a b ", agentpay.SessionDescriptionMaxLen/4)
	sess := h.session(t, reg.Merchant, func(c *ent.CheckoutSessionCreate) { c.SetDescription(description) })

	d, err := h.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "solana", "USDC")
	require.NoError(t, err)
	u, err := url.Parse(d.PaymentURI)
	require.NoError(t, err)
	label, message := u.Query().Get("label"), u.Query().Get("message")
	require.LessOrEqual(t, len(label), agentpay.PaymentLabelMaxBytes)
	require.LessOrEqual(t, len(message), agentpay.PaymentMessageMaxBytes)
	require.True(t, strings.HasSuffix(label, "…") && strings.HasPrefix(name, strings.TrimSuffix(label, "…")), label)
	require.True(t, strings.HasSuffix(message, "…") && strings.HasPrefix(description, strings.TrimSuffix(message, "…")), message)

	res := h.get(t, "/pay/"+sess.ExternalID)
	require.Equal(t, http.StatusOK, res.status, res.body)
	qr := h.get(t, "/pay/"+sess.ExternalID+"/qr.svg?chain=solana")
	require.Equal(t, http.StatusOK, qr.status, qr.body)
	assertQRDecodes(t, qr.body, d.PaymentURI)
}
