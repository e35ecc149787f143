package rest

import (
	"encoding/json"
	"net/http"
	"time"

	"agentpay"
	"agentpay/internal/httpx"
)

// Advanced registration and external wallet verification (spec 4.1, 4.2,
// 5): the client gets EIP-712 typed data from signature-message, signs it
// with the wallet (eth_signTypedData_v4) and posts the signature.

type signatureMessageResponse struct {
	Username      string `json:"username"`
	WalletAddress string `json:"wallet_address"`
	// Purpose is register (no agent holds the username) or verify_wallet
	// (the username's agent adds the wallet); SubmitTo names the endpoint.
	Purpose       string          `json:"purpose"`
	SubmitTo      string          `json:"submit_to"`
	SignatureType string          `json:"signature_type"`
	TypedData     json.RawMessage `json:"typed_data"`
	Message       string          `json:"message"`
	Nonce         string          `json:"nonce"`
	IssuedAt      time.Time       `json:"issued_at"`
	ExpiresAt     time.Time       `json:"expires_at"`
}

func (s *server) signatureMessage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m, err := s.svc.SignatureMessage(r.Context(), httpx.ClientIP(r, s.proxies), q.Get("username"), q.Get("wallet_address"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	submit := "POST /agents/register"
	if m.Purpose == agentpay.PurposeVerifyWallet {
		submit = "POST /agents/me/wallets/verify"
	}
	writeJSON(w, http.StatusOK, signatureMessageResponse{
		Username:      m.Username,
		WalletAddress: m.Wallet,
		Purpose:       m.Purpose,
		SubmitTo:      submit,
		SignatureType: agentpay.SignatureTypeEIP712,
		TypedData:     m.TypedData,
		Message:       m.Text,
		Nonce:         m.Nonce,
		IssuedAt:      m.IssuedAt,
		ExpiresAt:     m.ExpiresAt,
	})
}

type registerRequest struct {
	Username      string `json:"username"`
	WalletAddress string `json:"wallet_address"`
	Signature     string `json:"signature"`
	SignatureType string `json:"signature_type"`
}

func (s *server) register(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	reg, err := s.svc.Register(r.Context(), agentpay.RegisterRequest{
		Username:      req.Username,
		WalletAddress: req.WalletAddress,
		Signature:     req.Signature,
		SignatureType: req.SignatureType,
		Requester:     httpx.ClientIP(r, s.proxies),
	})
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	body := registerBody{registrationBody: newRegistrationBody(reg)}
	if reg.External != nil {
		w := newMyWalletBody(reg.Agent, reg.External)
		body.ExternalWallet = &w
	}
	writeJSON(w, http.StatusCreated, body)
}

// registerBody is the registration object of spec 2.1 (as quick-register
// answers it) plus the verified external wallet.
type registerBody struct {
	registrationBody
	ExternalWallet *myWalletBody `json:"external_wallet"`
}

type verifyWalletRequest struct {
	WalletAddress string `json:"wallet_address"`
	Signature     string `json:"signature"`
	SignatureType string `json:"signature_type"`
	Chain         string `json:"chain"`
	SetAsPrimary  bool   `json:"set_as_primary"`
}

// verifyWalletBody answers POST /agents/me/wallets/verify: the recorded
// wallet as GET /agents/me/wallets lists it.
type verifyWalletBody struct {
	AgentID string       `json:"agent_id"`
	Wallet  myWalletBody `json:"wallet"`
	Message string       `json:"message"`
}

func (s *server) verifyWallet(w http.ResponseWriter, r *http.Request) {
	var req verifyWalletRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	agent := agentFrom(r.Context())
	wallet, err := s.svc.VerifyWallet(r.Context(), agent, agentpay.VerifyWalletRequest{
		WalletAddress: req.WalletAddress,
		Signature:     req.Signature,
		SignatureType: req.SignatureType,
		Chain:         req.Chain,
		SetAsPrimary:  req.SetAsPrimary,
		Requester:     httpx.ClientIP(r, s.proxies),
	})
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, verifyWalletBody{
		AgentID: agent.ID.String(),
		Wallet:  newMyWalletBody(agent, wallet),
		Message: agentpay.WalletVerifiedMessage(agent, wallet),
	})
}
