package rest

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// The agent's side of humans (spec 4.2; docs/humans.md): invitations,
// pairings and the account events that tell the agent what humans did.

type inviteRequest struct {
	Email *string `json:"email"`
}

type inviteResponse struct {
	InviteID  string    `json:"invite_id"`
	Email     string    `json:"email"`
	Status    string    `json:"status"`
	InviteURL string    `json:"invite_url"`
	ExpiresAt time.Time `json:"expires_at"`
	Message   string    `json:"message"`
}

// inviteHuman answers 201 once the invitation and its e-mail are recorded
// (the worker sends it).
func (s *server) inviteHuman(w http.ResponseWriter, r *http.Request) {
	var body inviteRequest
	if err := decodeJSON(r, &body); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	if body.Email == nil {
		writeError(w, r, s.logger, areaAgent, agentpay.Invalid("email", "is required"))
		return
	}
	inv, err := s.svc.InviteHuman(r.Context(), agentFrom(r.Context()), *body.Email)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusCreated, inviteResponse{
		InviteID:  inv.Invitation.ID.String(),
		Email:     inv.Invitation.Email,
		Status:    "sent",
		InviteURL: inv.URL,
		ExpiresAt: inv.Invitation.ExpiresAt,
		Message:   inv.Message,
	})
}

type pairingRequestBody struct {
	UserID  *string `json:"user_id"`
	Message *string `json:"message"`
}

// pairingRequested is the answer of a pairing request.
type pairingRequested struct {
	PairingID string     `json:"pairing_id"`
	UserID    string     `json:"user_id"`
	Username  string     `json:"username"`
	Status    string     `json:"status"`
	Message   string     `json:"message"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// requestPairing answers 201 with the pending pairing.
func (s *server) requestPairing(w http.ResponseWriter, r *http.Request) {
	var body pairingRequestBody
	if err := decodeJSON(r, &body); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	in := agentpay.PairingRequest{}
	if body.UserID != nil {
		in.UserID = *body.UserID
	}
	if body.Message != nil {
		in.Message = *body.Message
	}
	v, err := s.svc.RequestPairing(r.Context(), agentFrom(r.Context()), in)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	p := v.Pairing
	writeJSON(w, http.StatusCreated, pairingRequested{
		PairingID: p.ID.String(), UserID: p.UserID.String(), Username: v.User.Username, Status: v.Status,
		Message: p.Message, CreatedAt: p.CreatedAt, ExpiresAt: p.ExpiresAt,
	})
}

func (s *server) myPairings(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	vs, err := s.svc.AgentPairings(r.Context(), a)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, httpx.PairingsOf(a, vs))
}

// revokePairing ends one of the agent's pairings (approved, pending or
// awaiting consent): the human's policy stops applying and they stop
// deciding at once. It answers the pairing as GET /agents/me/pairings
// lists it.
func (s *server) revokePairing(w http.ResponseWriter, r *http.Request) {
	v, err := s.svc.RevokeAgentPairing(r.Context(), agentFrom(r.Context()), chi.URLParam(r, "pairing_id"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, httpx.PairingOf(v))
}

type accountEventResponse struct {
	ID        int64           `json:"id"`
	Kind      string          `json:"kind"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

type accountEventsResponse struct {
	Events []accountEventResponse `json:"events"`
	// Next is the after to ask with next (the last id shown, or the one
	// asked with when none was).
	Next int64 `json:"next"`
}

// myEvents lists the agent's account events after ?after=<id> (default
// 0), oldest first, at most ?limit= (default and most 100).
func (s *server) myEvents(w http.ResponseWriter, r *http.Request) {
	after, err := queryInt(r, "after")
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	var limit *int
	if r.URL.Query().Has("limit") {
		n, err := queryInt(r, "limit")
		if err != nil {
			writeError(w, r, s.logger, areaAgent, err)
			return
		}
		limit = &n
	}
	a := agentFrom(r.Context())
	evs, err := s.svc.AccountEvents(r.Context(), agentpay.AgentParty(a.ID), int64(after), limit)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	out := accountEventsResponse{Events: make([]accountEventResponse, len(evs)), Next: int64(after)}
	for i, ev := range evs {
		// A stored message names its actions by their marks (agentpay.Action).
		data := json.RawMessage(httpx.RenderREST(string(ev.Data)))
		out.Events[i] = accountEventResponse{ID: ev.ID, Kind: ev.Kind, Data: data, CreatedAt: ev.CreatedAt}
		out.Next = ev.ID
	}
	writeJSON(w, http.StatusOK, out)
}
