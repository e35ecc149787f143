package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"agentpay"
)

// The merchant's ACP order webhook settings (acp_webhooks.go holds the
// rules): the key's mode's URL, and its secret, shown once when issued.

func (s *server) mountACPWebhookRoutes(r chi.Router) {
	r.Get("/merchants/me/acp-webhook", s.getACPWebhook)
	r.Put("/merchants/me/acp-webhook", s.setACPWebhook)
	r.Post("/merchants/me/acp-webhook/secret/roll", s.rollACPWebhookSecret)
}

type acpWebhookRequest struct {
	URL *string `json:"url"`
}

// acpWebhookBody is one mode's ACP webhook settings; secret and warning
// only in the answer that issued the secret.
type acpWebhookBody struct {
	URL       *string `json:"url"`
	Livemode  bool    `json:"livemode"`
	SecretSet bool    `json:"secret_set"`
	Secret    string  `json:"secret,omitempty"`
	Warning   string  `json:"warning,omitempty"`
}

func newACPWebhookBody(st *agentpay.ACPWebhookSettings) acpWebhookBody {
	out := acpWebhookBody{URL: nullable(st.URL), Livemode: st.Livemode, SecretSet: st.SecretSet, Secret: st.Secret}
	if st.Secret != "" {
		out.Warning = agentpay.ACPWebhookSecretWarning
	}
	return out
}

func (s *server) getACPWebhook(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.ACPWebhook(r.Context(), merchantFrom(r.Context()))
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, newACPWebhookBody(st))
}

func (s *server) setACPWebhook(w http.ResponseWriter, r *http.Request) {
	var req acpWebhookRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	if req.URL == nil {
		writeError(w, r, s.logger, areaMerchant, agentpay.Invalid("url", "is required (\"\" removes it)"))
		return
	}
	st, err := s.svc.SetACPWebhook(r.Context(), merchantFrom(r.Context()), *req.URL)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, newACPWebhookBody(st))
}

func (s *server) rollACPWebhookSecret(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.RollACPWebhookSecret(r.Context(), merchantFrom(r.Context()))
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, newACPWebhookBody(st))
}
