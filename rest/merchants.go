package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

// The merchant API (spec 4.3): registration, the merchant's profile and
// keys, and checkout sessions. Every route but registration needs
// X-Checkout-Secret-Key; validation errors are 422 (spec 7.2).

// mountMerchantRoutes serves /checkout/merchants/... and /checkout/sessions/...
func (s *server) mountMerchantRoutes(r chi.Router) {
	r.With(s.limitIP(agentpay.RateRequest), s.limitIP(agentpay.RateRegistration)).
		Post("/merchants/register", s.registerMerchant)
	r.Group(func(r chi.Router) {
		r.Use(s.requireMerchant)
		r.Get("/merchants/me", s.myMerchant)
		r.Patch("/merchants/me", s.updateMerchant)
		r.Post("/merchants/me/keys/roll", s.rollMerchantKeys)
		r.Post("/merchants/me/webhook-secret/roll", s.rollWebhookSecret)
		s.mountACPWebhookRoutes(r)
		r.Post("/sessions", s.createSession)
		r.Get("/sessions", s.listSessions)
		r.Get("/sessions/{external_id}", s.getSession)
		r.Post("/sessions/{external_id}/cancel", s.cancelSession)
		r.Post("/sessions/{external_id}/refunds", s.createRefund)
		r.Get("/sessions/{external_id}/refunds", s.listRefunds)
		s.mountWebhookRoutes(r)
	})
}

type merchantCtxKey struct{}

// merchantFrom returns the merchant authenticated by requireMerchant.
func merchantFrom(ctx context.Context) *agentpay.MerchantAuth {
	a, _ := ctx.Value(merchantCtxKey{}).(*agentpay.MerchantAuth)
	return a
}

// requireMerchant authenticates X-Checkout-Secret-Key: 401 when missing,
// unknown or rolled, 403 when the merchant is deactivated.
func (s *server) requireMerchant(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, err := s.svc.AuthenticateMerchant(r.Context(), r.Header.Get(httpx.MerchantKeyHeader))
		if err != nil {
			writeError(w, r, s.logger, areaMerchant, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), merchantCtxKey{}, auth)))
	})
}

// merchantRequest holds the fields of spec 2.5; absent and null fields are
// nil (unchanged by PATCH).
type merchantRequest struct {
	Name              *string         `json:"name"`
	Email             *string         `json:"email"`
	Website           *string         `json:"website"`
	WebhookURL        *string         `json:"webhook_url"`
	SuccessURL        *string         `json:"success_url"`
	CancelURL         *string         `json:"cancel_url"`
	SettlementType    *string         `json:"settlement_type"`
	SettlementAddress *string         `json:"settlement_address"`
	SettlementChain   *string         `json:"settlement_chain"`
	AcceptedTokens    *[]tokenRefBody `json:"accepted_tokens"`
	BrandColor        *string         `json:"brand_color"`
	// SettleHeldPayments: pay held payments out in the next settlement
	// batch (docs/money.md#settlement).
	SettleHeldPayments *bool `json:"settle_held_payments"`
}

type tokenRefBody struct {
	Chain string `json:"chain"`
	Token string `json:"token"`
}

func (req merchantRequest) input() agentpay.MerchantInput {
	in := agentpay.MerchantInput{
		Name: req.Name, Email: req.Email, Website: req.Website, WebhookURL: req.WebhookURL,
		SuccessURL: req.SuccessURL, CancelURL: req.CancelURL, SettlementType: req.SettlementType,
		SettlementAddress: req.SettlementAddress, SettlementChain: req.SettlementChain, BrandColor: req.BrandColor,
		SettleHeldPayments: req.SettleHeldPayments,
	}
	if req.AcceptedTokens != nil {
		tokens := make([]agentpay.TokenRef, len(*req.AcceptedTokens))
		for i, t := range *req.AcceptedTokens {
			tokens[i] = agentpay.TokenRef{Chain: t.Chain, Token: t.Token}
		}
		in.AcceptedTokens = &tokens
	}
	return in
}

// merchantBody is a merchant as the API shows it. Optional fields not set
// are null; accepted_tokens is the effective list (the default spelled out);
// webhook_url is the key's mode's.
type merchantBody struct {
	ID                 string         `json:"id"`
	Name               string         `json:"name"`
	Email              string         `json:"email"`
	Website            *string        `json:"website"`
	WebhookURL         *string        `json:"webhook_url"`
	SuccessURL         *string        `json:"success_url"`
	CancelURL          *string        `json:"cancel_url"`
	SettlementType     string         `json:"settlement_type"`
	SettlementAddress  *string        `json:"settlement_address"`
	SettlementChain    *string        `json:"settlement_chain"`
	AcceptedTokens     []tokenRefBody `json:"accepted_tokens"`
	BrandColor         *string        `json:"brand_color"`
	SettleHeldPayments bool           `json:"settle_held_payments"`
	Active             bool           `json:"active"`
	PublicKeys         publicKeysBody `json:"public_keys"`
	CreatedAt          time.Time      `json:"created_at"`
	UpdatedAt          time.Time      `json:"updated_at"`
}

type publicKeysBody struct {
	Live string `json:"live"`
	Test string `json:"test"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newMerchantBody(p *agentpay.MerchantProfile) merchantBody {
	m := p.Merchant
	tokens := agentpay.AcceptedTokens(m)
	out := merchantBody{
		ID:                 m.ID.String(),
		Name:               m.Name,
		Email:              m.Email,
		Website:            nullable(m.Website),
		WebhookURL:         nullable(p.WebhookURL),
		SuccessURL:         nullable(m.SuccessURL),
		CancelURL:          nullable(m.CancelURL),
		SettlementType:     string(m.SettlementType),
		SettlementAddress:  nullable(m.SettlementAddress),
		SettlementChain:    nullable(m.SettlementChain),
		AcceptedTokens:     make([]tokenRefBody, len(tokens)),
		BrandColor:         nullable(m.BrandColor),
		SettleHeldPayments: m.SettleHeldPayments,
		Active:             m.Active,
		PublicKeys:         publicKeysBody{Live: p.LivePublicKey, Test: p.TestPublicKey},
		CreatedAt:          m.CreatedAt.UTC(),
		UpdatedAt:          m.UpdatedAt.UTC(),
	}
	for i, t := range tokens {
		out.AcceptedTokens[i] = tokenRefBody{Chain: t.Chain, Token: t.Token}
	}
	return out
}

// merchantKeysBody is the credentials as issued: all of them at
// registration; after a roll, the rolled mode's key pair only.
type merchantKeysBody struct {
	LivePublicKey     string `json:"live_public_key,omitempty"`
	LiveSecretKey     string `json:"live_secret_key,omitempty"`
	TestPublicKey     string `json:"test_public_key,omitempty"`
	TestSecretKey     string `json:"test_secret_key,omitempty"`
	WebhookSecret     string `json:"webhook_secret,omitempty"`
	TestWebhookSecret string `json:"test_webhook_secret,omitempty"`
}

func newMerchantKeysBody(k agentpay.MerchantKeys) merchantKeysBody {
	return merchantKeysBody{
		LivePublicKey: k.LivePublicKey, LiveSecretKey: k.LiveSecretKey,
		TestPublicKey: k.TestPublicKey, TestSecretKey: k.TestSecretKey,
		WebhookSecret: k.WebhookSecret, TestWebhookSecret: k.TestWebhookSecret,
	}
}

type merchantRegistrationBody struct {
	Merchant merchantBody     `json:"merchant"`
	Keys     merchantKeysBody `json:"keys"`
	Warning  string           `json:"warning"`
	// DashboardURL is where the merchant's people manage it, once its
	// contact e-mail is confirmed (docs/dashboard.md).
	DashboardURL string `json:"dashboard_url"`
}

func (s *server) registerMerchant(w http.ResponseWriter, r *http.Request) {
	var req merchantRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	reg, err := s.svc.RegisterMerchant(r.Context(), req.input())
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	k := reg.Keys
	profile := &agentpay.MerchantProfile{Merchant: reg.Merchant, LivePublicKey: k.LivePublicKey, TestPublicKey: k.TestPublicKey,
		WebhookURL: agentpay.WebhookURLOf(reg.Merchant, agentpay.ModeLive)}
	writeJSON(w, http.StatusCreated, merchantRegistrationBody{
		Merchant:     newMerchantBody(profile),
		Keys:         newMerchantKeysBody(k),
		Warning:      agentpay.MerchantKeysWarning,
		DashboardURL: reg.DashboardURL,
	})
}

func (s *server) writeMerchant(w http.ResponseWriter, r *http.Request, m *ent.Merchant) {
	p, err := s.svc.MerchantProfile(r.Context(), m, merchantFrom(r.Context()).Mode)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, newMerchantBody(p))
}

func (s *server) myMerchant(w http.ResponseWriter, r *http.Request) {
	s.writeMerchant(w, r, merchantFrom(r.Context()).Merchant)
}

func (s *server) updateMerchant(w http.ResponseWriter, r *http.Request) {
	var req merchantRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	m, err := s.svc.UpdateMerchant(r.Context(), merchantFrom(r.Context()), req.input())
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	s.writeMerchant(w, r, m)
}

type rolledKeysBody struct {
	Keys    merchantKeysBody `json:"keys"`
	Warning string           `json:"warning"`
}

// rollKeysRequest is the optional body of a key roll: which mode's pair
// (absent: the key's own).
type rollKeysRequest struct {
	Mode string `json:"mode"`
}

func (s *server) rollMerchantKeys(w http.ResponseWriter, r *http.Request) {
	var req rollKeysRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	keys, err := s.svc.RollMerchantKeys(r.Context(), merchantFrom(r.Context()), agentpay.Mode(req.Mode))
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, rolledKeysBody{
		Keys:    newMerchantKeysBody(*keys),
		Warning: agentpay.MerchantKeysRolledWarning,
	})
}

// rollWebhookSecretRequest is the optional body of a webhook secret roll:
// how long the replaced secret keeps signing (absent: 24 hours).
type rollWebhookSecretRequest struct {
	OverlapSeconds *int64 `json:"overlap_seconds"`
}

type rolledWebhookSecretBody struct {
	WebhookSecret           string     `json:"webhook_secret"`
	Livemode                bool       `json:"livemode"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	Warning                 string     `json:"warning"`
}

func (s *server) rollWebhookSecret(w http.ResponseWriter, r *http.Request) {
	var req rollWebhookSecretRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	rolled, err := s.svc.RollWebhookSecret(r.Context(), merchantFrom(r.Context()), req.OverlapSeconds)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, rolledWebhookSecretBody{
		WebhookSecret:           rolled.Secret,
		Livemode:                rolled.Livemode,
		PreviousSecretExpiresAt: utcPtr(rolled.PreviousExpiresAt),
		Warning:                 agentpay.WebhookSecretRolledWarning,
	})
}

// Sessions.

type createSessionRequest struct {
	Amount         *httpx.Amount   `json:"amount"`
	Currency       string          `json:"currency"`
	Description    string          `json:"description"`
	SuccessURL     string          `json:"success_url"`
	CancelURL      string          `json:"cancel_url"`
	Metadata       json.RawMessage `json:"metadata"`
	IdempotencyKey *string         `json:"idempotency_key"`
}

// sessionBody is a checkout session as the merchant API shows it: the
// fields of spec 2.6 and what the merchant set; unset optional fields are
// null, metadata is always an object.
type sessionBody struct {
	ID             string         `json:"id"`
	ExternalID     string         `json:"external_id"`
	Livemode       bool           `json:"livemode"`
	AmountUSD      httpx.Amount   `json:"amount_usd"`
	Currency       string         `json:"currency"`
	Status         string         `json:"status"`
	Description    *string        `json:"description"`
	SuccessURL     *string        `json:"success_url"`
	CancelURL      *string        `json:"cancel_url"`
	Metadata       map[string]any `json:"metadata"`
	IdempotencyKey *string        `json:"idempotency_key"`
	Chain          *string        `json:"chain"`
	Token          *string        `json:"token"`
	CreatedAt      time.Time      `json:"created_at"`
	ExpiresAt      time.Time      `json:"expires_at"`
	CancelledAt    *time.Time     `json:"cancelled_at"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func newSessionBody(cs *ent.CheckoutSession) sessionBody {
	meta := cs.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	return sessionBody{
		ID:             cs.ID.String(),
		ExternalID:     cs.ExternalID,
		Livemode:       cs.Livemode,
		AmountUSD:      httpx.Amount{Decimal: cs.AmountUsd},
		Currency:       cs.Currency,
		Status:         string(cs.Status),
		Description:    nullable(cs.Description),
		SuccessURL:     nullable(cs.SuccessURL),
		CancelURL:      nullable(cs.CancelURL),
		Metadata:       meta,
		IdempotencyKey: cs.IdempotencyKey,
		Chain:          nullable(cs.Chain),
		Token:          nullable(cs.Token),
		CreatedAt:      cs.CreatedAt.UTC(),
		ExpiresAt:      cs.ExpiresAt.UTC(),
		CancelledAt:    utcPtr(cs.CancelledAt),
	}
}

// sessionEnvelope is the answer of create, read and cancel: the session
// and the addresses of its hosted page.
type sessionEnvelope struct {
	Session     sessionBody `json:"session"`
	CheckoutURL string      `json:"checkout_url"`
	EmbedURL    string      `json:"embed_url"`
}

func (s *server) sessionEnvelope(cs *ent.CheckoutSession) sessionEnvelope {
	checkout, embed := s.svc.SessionURLs(cs.ExternalID)
	return sessionEnvelope{Session: newSessionBody(cs), CheckoutURL: checkout, EmbedURL: embed}
}

// decodeMetadata reads the metadata object keeping numbers exact
// (json.Number), so the service can refuse what a double would round.
func decodeMetadata(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, agentpay.Invalid("metadata", "must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, agentpay.Invalid("metadata", "must be an object")
	}
	return m, nil
}

func (s *server) createSession(w http.ResponseWriter, r *http.Request) {
	var req createSessionRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	meta, err := decodeMetadata(req.Metadata)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	in := agentpay.SessionInput{
		Currency: req.Currency, Description: req.Description,
		SuccessURL: req.SuccessURL, CancelURL: req.CancelURL,
		Metadata: meta, IdempotencyKey: req.IdempotencyKey,
	}
	if req.Amount != nil {
		d := req.Amount.Decimal
		in.Amount = &d
	}
	created, err := s.svc.CreateSession(r.Context(), merchantFrom(r.Context()), in)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusCreated, sessionEnvelope{
		Session:     newSessionBody(created.Session),
		CheckoutURL: created.CheckoutURL,
		EmbedURL:    created.EmbedURL,
	})
}

func (s *server) getSession(w http.ResponseWriter, r *http.Request) {
	cs, err := s.svc.MerchantSession(r.Context(), merchantFrom(r.Context()), chi.URLParam(r, "external_id"))
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, s.sessionEnvelope(cs))
}

func (s *server) cancelSession(w http.ResponseWriter, r *http.Request) {
	cs, err := s.svc.CancelSession(r.Context(), merchantFrom(r.Context()), chi.URLParam(r, "external_id"))
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, s.sessionEnvelope(cs))
}

type sessionListBody struct {
	Data    []sessionBody `json:"data"`
	Total   int           `json:"total"`
	Limit   int           `json:"limit"`
	Offset  int           `json:"offset"`
	HasMore bool          `json:"has_more"`
}

// queryInt reads an optional integer query parameter (absent: 0).
func queryInt(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, agentpay.Invalid(name, "must be an integer")
	}
	return n, nil
}

func (s *server) listSessions(w http.ResponseWriter, r *http.Request) {
	limit, err := queryInt(r, "limit")
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	offset, err := queryInt(r, "offset")
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	page, err := s.svc.ListSessions(r.Context(), merchantFrom(r.Context()), agentpay.ListParams{Limit: limit, Offset: offset})
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	out := sessionListBody{
		Data:    make([]sessionBody, len(page.Sessions)),
		Total:   page.Total,
		Limit:   page.Limit,
		Offset:  page.Offset,
		HasMore: page.HasMore,
	}
	for i, cs := range page.Sessions {
		out.Data[i] = newSessionBody(cs)
	}
	writeJSON(w, http.StatusOK, out)
}
