package rest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/internal/httpx"
)

// The checkout page endpoints (spec 4.4). No key is required; a page that
// sends X-Checkout-Public-Key has it checked (401 when it is not the
// session's merchant's key for the session's mode). Validation errors are
// 422 as on the rest of the merchant API.

// mountCheckoutPageRoutes serves /checkout/pay/... under the per-IP limit of
// unauthenticated endpoints (the page's 3-second status polling uses 20 of
// its requests a minute).
func (s *server) mountCheckoutPageRoutes(r chi.Router) {
	r.Route("/pay/{external_id}", func(r chi.Router) {
		r.Use(s.limitIP(agentpay.RateRequest))
		r.Get("/", s.checkoutPage)
		r.Post("/select", s.checkoutSelect)
		r.Get("/status", s.checkoutStatus)
		// An agent pays the session from its wallet (agentcheckout.go):
		// the agent's key and rate limit, beside the page's per-IP one.
		r.With(s.requireAgent).Post("/agent-pay", s.agentPay)
		// x402: the session's 402 and its settlement (x402.go).
		r.Get("/x402", s.checkoutX402)
		// MPP: the session's Payment challenges and their credentials
		// (mpp.go); the x402 address answers them too.
		r.Get("/mpp", s.checkoutMPP)
		// A browser wallet's signed authorization, relayed by the
		// treasury (walletpay.go): the page's per-IP limit.
		r.Post("/authorization", s.walletPay)
	})
}

type paymentOptionResponse struct {
	Chain        string `json:"chain"`
	Token        string `json:"token"`
	TokenAddress string `json:"token_address"`
	Decimals     int32  `json:"decimals"`
}

type checkoutMerchantResponse struct {
	Name       string  `json:"name"`
	BrandColor *string `json:"brand_color"`
	Website    *string `json:"website"`
}

// checkoutPageResponse is what GET /checkout/pay/{external_id} answers.
type checkoutPageResponse struct {
	ExternalID     string                   `json:"external_id"`
	Status         string                   `json:"status"`
	Livemode       bool                     `json:"livemode"`
	AmountUSD      httpx.Amount             `json:"amount_usd"`
	Currency       string                   `json:"currency"`
	Description    *string                  `json:"description"`
	ExpiresAt      time.Time                `json:"expires_at"`
	Merchant       checkoutMerchantResponse `json:"merchant"`
	SuccessURL     *string                  `json:"success_url"`
	CancelURL      *string                  `json:"cancel_url"`
	AcceptedTokens []paymentOptionResponse  `json:"accepted_tokens"`
	Deposit        *depositResponse         `json:"deposit"`
}

// depositResponse is the deposit address and QR data (select's answer, and
// the page's deposit once a chain is selected).
type depositResponse struct {
	ExternalID   string       `json:"external_id"`
	Status       string       `json:"status"`
	Chain        string       `json:"chain"`
	ChainID      *uint64      `json:"chain_id"`
	Token        string       `json:"token"`
	TokenAddress string       `json:"token_address"`
	Decimals     int32        `json:"decimals"`
	Address      string       `json:"address"`
	AmountUSD    httpx.Amount `json:"amount_usd"`
	AmountToken  httpx.Amount `json:"amount_token"`
	// AmountBaseUnits is amount_token in the token's smallest unit.
	AmountBaseUnits httpx.Amount `json:"amount_base_units"`
	PaymentURI      string       `json:"payment_uri"`
	QRData          string       `json:"qr_data"`
	ExpiresAt       time.Time    `json:"expires_at"`
	// EIP712Domain is what a browser wallet signs a TransferWithAuthorization
	// under (POST .../authorization); null on Solana.
	EIP712Domain *eip712DomainResponse `json:"eip712_domain"`
}

// eip712DomainResponse is the token's EIP-712 domain as
// eth_signTypedData_v4 takes it.
type eip712DomainResponse struct {
	Name              string `json:"name"`
	Version           string `json:"version"`
	ChainID           uint64 `json:"chain_id"`
	VerifyingContract string `json:"verifying_contract"`
}

// checkoutStatusResponse is spec 2.7 plus the confirmations and the
// payment's progress (agentpay.ProgressOf: the page's state, what is due,
// what was paid beyond the amount).
type checkoutStatusResponse struct {
	Status                string       `json:"status"`
	AmountPaid            httpx.Amount `json:"amount_paid"`
	Chain                 *string      `json:"chain"`
	Token                 *string      `json:"token"`
	Confirmations         uint64       `json:"confirmations"`
	ConfirmationsRequired *uint64      `json:"confirmations_required"`
	State                 string       `json:"state"`
	AmountDue             httpx.Amount `json:"amount_due"`
	AmountExcess          httpx.Amount `json:"amount_excess"`
}

// selectRequest is the body of POST /checkout/pay/{external_id}/select.
type selectRequest struct {
	Chain *string `json:"chain"`
	Token *string `json:"token"`
}

func (s *server) checkoutPage(w http.ResponseWriter, r *http.Request) {
	page, err := s.svc.CheckoutPage(r.Context(), chi.URLParam(r, "external_id"), r.Header.Get(httpx.PublicKeyHeader))
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	sess, m := page.Session, page.Merchant
	out := checkoutPageResponse{
		ExternalID:  sess.ExternalID,
		Status:      string(sess.Status),
		Livemode:    sess.Livemode,
		AmountUSD:   httpx.Amount{Decimal: sess.AmountUsd},
		Currency:    sess.Currency,
		Description: checkoutNullable(sess.Description),
		ExpiresAt:   sess.ExpiresAt.UTC(),
		Merchant: checkoutMerchantResponse{
			Name:       m.Name,
			BrandColor: checkoutNullable(m.BrandColor),
			Website:    checkoutNullable(m.Website),
		},
		SuccessURL:     checkoutNullable(page.SuccessURL),
		CancelURL:      checkoutNullable(page.CancelURL),
		AcceptedTokens: []paymentOptionResponse{},
	}
	for _, o := range page.Options {
		out.AcceptedTokens = append(out.AcceptedTokens, paymentOptionResponse{
			Chain: string(o.Chain), Token: o.Token, TokenAddress: o.TokenAddress, Decimals: o.Decimals,
		})
	}
	if page.Deposit != nil {
		d := toDepositResponse(sess.ExternalID, page.Deposit)
		out.Deposit = &d
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) checkoutSelect(w http.ResponseWriter, r *http.Request) {
	var body selectRequest
	if err := decodeJSON(r, &body); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	var chain, token string
	if body.Chain != nil {
		chain = *body.Chain
	}
	if body.Token != nil {
		token = *body.Token
	}
	externalID := chi.URLParam(r, "external_id")
	d, err := s.svc.SelectPaymentMethod(r.Context(), externalID, r.Header.Get(httpx.PublicKeyHeader), chain, token)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, toDepositResponse(externalID, d))
}

func (s *server) checkoutStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.CheckoutStatus(r.Context(), chi.URLParam(r, "external_id"), r.Header.Get(httpx.PublicKeyHeader))
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	// The page polls this every 3 seconds: encoded by hand into a pooled
	// buffer, byte for byte what writeJSON writes for checkoutStatusResponse.
	buf := statusBufs.Get().(*[]byte)
	b := appendCheckoutStatus((*buf)[:0], st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	*buf = b
	statusBufs.Put(buf)
}

var statusBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// appendCheckoutStatus appends the JSON of checkoutStatusResponse for st and
// a newline, as writeJSON would.
func appendCheckoutStatus(b []byte, st *agentpay.CheckoutStatus) []byte {
	b = append(b, `{"status":`...)
	b = appendJSONString(b, string(st.Status))
	b = append(b, `,"amount_paid":`...)
	b = append(b, st.AmountPaid.String()...)
	b = append(b, `,"chain":`...)
	b = appendJSONNullable(b, st.Chain)
	b = append(b, `,"token":`...)
	b = appendJSONNullable(b, st.Token)
	b = append(b, `,"confirmations":`...)
	b = strconv.AppendUint(b, st.Confirmations, 10)
	b = append(b, `,"confirmations_required":`...)
	if st.Required == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendUint(b, *st.Required, 10)
	}
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(st.Progress.State))
	b = append(b, `,"amount_due":`...)
	b = append(b, st.Progress.Due.String()...)
	b = append(b, `,"amount_excess":`...)
	b = append(b, st.Progress.Excess.String()...)
	return append(b, "}\n"...)
}

// appendJSONNullable is checkoutNullable's encoding: "" is null.
func appendJSONNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// appendJSONString appends s as encoding/json writes it: plain printable
// ASCII as is, anything else through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func toDepositResponse(externalID string, d *agentpay.DepositInstructions) depositResponse {
	out := depositResponse{
		ExternalID:      externalID,
		Status:          string(d.Status),
		Chain:           string(d.Chain),
		Token:           d.Token,
		TokenAddress:    d.TokenAddress,
		Decimals:        d.Decimals,
		Address:         d.Address,
		AmountUSD:       httpx.Amount{Decimal: d.AmountUSD},
		AmountToken:     httpx.Amount{Decimal: d.AmountToken},
		AmountBaseUnits: httpx.Amount{Decimal: decimal.NewFromBigInt(d.AmountUnits, 0)},
		PaymentURI:      d.PaymentURI,
		QRData:          d.PaymentURI,
		ExpiresAt:       d.ExpiresAt.UTC(),
	}
	if d.ChainID != 0 {
		id := d.ChainID
		out.ChainID = &id
	}
	if dom := d.TokenDomain; dom != nil {
		out.EIP712Domain = &eip712DomainResponse{Name: dom.Name, Version: dom.Version, ChainID: dom.ChainID, VerifyingContract: dom.VerifyingContract}
	}
	return out
}

// checkoutNullable is nil for "", so an absent text field is null in JSON.
func checkoutNullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
