package rest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/httpx"
	"agentpay/internal/idempotency"
)

// The ACP 2026-04-17 seller endpoints (acp.go holds the rules): the
// merchant's secret key is ACP's bearer token, every POST takes
// Idempotency-Key, a replay answers Idempotent-Replayed: true, and errors
// are ACP's {type, code, message}.

const acpBodyLimit = 64 << 10

func (s *server) mountACPRoutes(r chi.Router) {
	r.Get("/.well-known/acp.json", s.acpDiscovery)
	r.Route("/checkout_sessions", func(r chi.Router) {
		r.Use(s.requireACPMerchant)
		r.Post("/", s.acpCreate)
		r.Get("/{id}", s.acpGet)
		r.Post("/{id}", s.acpUpdate)
		r.Post("/{id}/complete", s.acpComplete)
		r.Post("/{id}/cancel", s.acpCancel)
	})
}

type acpError struct {
	Type              string   `json:"type"`
	Code              string   `json:"code"`
	Message           string   `json:"message"`
	Param             string   `json:"param,omitempty"`
	SupportedVersions []string `json:"supported_versions,omitempty"`
}

func writeACPError(w http.ResponseWriter, status int, e acpError) {
	w.Header().Set("API-Version", agentpay.ACPVersion)
	writeJSON(w, status, e)
}

// acpFail maps a service error to ACP's shape with our status.
func (s *server) acpFail(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := httpx.ErrorStatus(err, true)
	e := acpError{Type: "invalid_request", Code: "invalid", Message: detail}
	switch {
	case status >= 500:
		e.Type, e.Code = "processing_error", "processing_error"
		writeError(w, r, s.logger, areaMerchant, err) // logs it
		return
	case errors.Is(err, idempotency.ErrKeyReused):
		e.Code = "idempotency_conflict" // ACP: 422
	case errors.Is(err, idempotency.ErrInProgress):
		e.Code = "idempotency_in_flight" // ACP: 409
	case status == http.StatusNotFound:
		e.Code = "not_found"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Code = "unauthorized"
	}
	writeACPError(w, status, e)
}

// requireACPMerchant authenticates the bearer (the merchant's secret key)
// and checks API-Version when the agent sends one.
func (s *server) requireACPMerchant(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("API-Version"); v != "" && v != agentpay.ACPVersion {
			writeACPError(w, http.StatusBadRequest, acpError{Type: "invalid_request", Code: "unsupported_version",
				Message: "API-Version " + v + " is not supported", SupportedVersions: []string{agentpay.ACPVersion}})
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			writeACPError(w, http.StatusUnauthorized, acpError{Type: "invalid_request", Code: "unauthorized", Message: "Authorization: Bearer <secret key> is required"})
			return
		}
		auth, err := s.svc.AuthenticateMerchant(r.Context(), token)
		if err != nil {
			s.acpFail(w, r, err)
			return
		}
		w.Header().Set("API-Version", agentpay.ACPVersion)
		r.Body = http.MaxBytesReader(w, r.Body, acpBodyLimit)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), merchantCtxKey{}, auth)))
	})
}

// acpKey reads the required Idempotency-Key (ACP: idempotency_key_required).
func acpKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	k := r.Header.Get("Idempotency-Key")
	if k == "" {
		writeACPError(w, http.StatusBadRequest, acpError{Type: "invalid_request", Code: "idempotency_key_required", Message: "Idempotency-Key is required"})
		return "", false
	}
	return k, true
}

// decodeACP reads an ACP body: fields the facade does not use are allowed.
func decodeACP(w http.ResponseWriter, r *http.Request, dst any) bool {
	if err := json.NewDecoder(r.Body).Decode(dst); err != nil {
		writeACPError(w, http.StatusBadRequest, acpError{Type: "invalid_request", Code: "invalid_json", Message: "request body must be a JSON object of the ACP schema"})
		return false
	}
	return true
}

type acpCreateRequest struct {
	Currency  string             `json:"currency"`
	LineItems []agentpay.ACPItem `json:"line_items"`
}

type acpCompleteRequest struct {
	PaymentData struct {
		HandlerID  string `json:"handler_id"`
		Instrument struct {
			Type       string `json:"type"`
			Credential struct {
				Type  string `json:"type"`
				Token string `json:"token"`
			} `json:"credential"`
		} `json:"instrument"`
	} `json:"payment_data"`
}

func (s *server) acpAnswer(w http.ResponseWriter, status int, cs *ent.CheckoutSession, replayed bool) {
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, s.acpSession(cs))
}

func (s *server) acpCreate(w http.ResponseWriter, r *http.Request) {
	key, ok := acpKey(w, r)
	if !ok {
		return
	}
	var req acpCreateRequest
	if !decodeACP(w, r, &req) {
		return
	}
	cs, replayed, err := s.svc.CreateACPCheckout(r.Context(), merchantFrom(r.Context()), key,
		agentpay.ACPCreate{Currency: req.Currency, LineItems: req.LineItems})
	if err != nil {
		s.acpFail(w, r, err)
		return
	}
	s.acpAnswer(w, http.StatusCreated, cs, replayed)
}

func (s *server) acpGet(w http.ResponseWriter, r *http.Request) {
	cs, err := s.svc.MerchantSession(r.Context(), merchantFrom(r.Context()), chi.URLParam(r, "id"))
	if err != nil {
		s.acpFail(w, r, err)
		return
	}
	s.acpAnswer(w, http.StatusOK, cs, false)
}

// acpUpdate: the facade's sessions are priced at creation (no fulfillment,
// no buyer fields change the amount), so an update answers the session.
func (s *server) acpUpdate(w http.ResponseWriter, r *http.Request) {
	if _, ok := acpKey(w, r); !ok {
		return
	}
	var ignored map[string]any
	if !decodeACP(w, r, &ignored) {
		return
	}
	s.acpGet(w, r)
}

func (s *server) acpCancel(w http.ResponseWriter, r *http.Request) {
	key, ok := acpKey(w, r)
	if !ok {
		return
	}
	cs, replayed, err := s.svc.CancelACPCheckout(r.Context(), merchantFrom(r.Context()), key, chi.URLParam(r, "id"))
	if err != nil {
		s.acpFail(w, r, err)
		return
	}
	s.acpAnswer(w, http.StatusOK, cs, replayed)
}

func (s *server) acpComplete(w http.ResponseWriter, r *http.Request) {
	key, ok := acpKey(w, r)
	if !ok {
		return
	}
	var req acpCompleteRequest
	if !decodeACP(w, r, &req) {
		return
	}
	pd := req.PaymentData
	cred := agentpay.ACPCredential{HandlerID: pd.HandlerID, Type: pd.Instrument.Credential.Type,
		Token: pd.Instrument.Credential.Token, Realm: r.Host}
	cs, replayed, err := s.svc.CompleteACPCheckout(r.Context(), merchantFrom(r.Context()), key, chi.URLParam(r, "id"),
		cred, httpx.ClientIP(r, s.proxies))
	if err != nil {
		s.acpFail(w, r, err)
		return
	}
	s.acpAnswer(w, http.StatusOK, cs, replayed)
}

// acpSession is a session in ACP's CheckoutSession shape.
func (s *server) acpSession(cs *ent.CheckoutSession) map[string]any {
	items := []any{}
	for i, it := range agentpay.ACPLineItems(cs) {
		item := map[string]any{"id": it.ID, "unit_amount": it.UnitAmount}
		if it.Name != "" {
			item["name"] = it.Name
		}
		items = append(items, map[string]any{
			"id": cs.ExternalID + "_li_" + strconv.Itoa(i), "item": item, "quantity": 1, "unit_amount": it.UnitAmount,
			"totals": []any{map[string]any{"type": "total", "display_text": "Total", "amount": it.UnitAmount}},
		})
	}
	cents := cs.AmountUsd.Shift(agentpay.SessionAmountDecimals).IntPart()
	out := map[string]any{
		"id":                  cs.ExternalID,
		"protocol":            map[string]any{"version": agentpay.ACPVersion},
		"status":              agentpay.ACPStatus(cs.Status),
		"currency":            "usd",
		"line_items":          items,
		"totals":              []any{map[string]any{"type": "subtotal", "display_text": "Subtotal", "amount": cents}, map[string]any{"type": "total", "display_text": "Total", "amount": cents}},
		"fulfillment_options": []any{},
		"messages":            []any{},
		"links":               []any{},
		"capabilities":        map[string]any{"payment": map[string]any{"handlers": []any{s.acpHandler()}}},
		"created_at":          cs.CreatedAt.UTC(),
		"updated_at":          cs.UpdatedAt.UTC(),
		"expires_at":          cs.ExpiresAt.UTC(),
	}
	if cs.Status == checkoutsession.StatusConfirmed {
		checkoutURL, _ := s.svc.SessionURLs(cs.ExternalID)
		out["order"] = map[string]any{"id": agentpay.ACPOrderID(cs.ExternalID), "checkout_session_id": cs.ExternalID, "permalink_url": checkoutURL}
	}
	return out
}

// acpHandler is the crypto payment handler: an x402 v2 payment payload
// (base64 JSON, as the PAYMENT-SIGNATURE header carries it) in
// payment_data.instrument.credential.token.
func (s *server) acpHandler() map[string]any {
	return map[string]any{
		"id": agentpay.ACPX402HandlerID, "name": "org.x402.exact", "display_name": "USDC (x402)",
		"version": agentpay.ACPVersion, "spec": "https://github.com/coinbase/x402/blob/main/specs/x402-specification-v2.md",
		"requires_delegate_payment": false, "requires_pci_compliance": false, "psp": "agentpay",
		"config_schema":      "https://github.com/coinbase/x402/blob/main/specs/schemes/exact/scheme_exact_evm.md",
		"instrument_schemas": []any{"https://github.com/coinbase/x402/blob/main/specs/x402-specification-v2.md"},
		"config": map[string]any{"x402_version": 2, "credential_type": agentpay.ACPCredentialX402,
			"credential_types": []string{agentpay.ACPCredentialX402, agentpay.ACPCredentialMPP}},
	}
}

func (s *server) acpDiscovery(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"protocol":     map[string]any{"name": "acp", "version": agentpay.ACPVersion, "supported_versions": []string{agentpay.ACPVersion}},
		"api_base_url": strings.TrimSuffix(requestURL(r), "/.well-known/acp.json"),
		"transports":   []string{"rest"},
		"capabilities": map[string]any{"services": []string{"checkout"}},
	})
}
