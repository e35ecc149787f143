package rest

import (
	"net/http"

	"agentpay"
	"agentpay/internal/httpx"
)

// sendRequest is the body of POST /agents/me/wallet/send (spec 4.2).
type sendRequest struct {
	ToUsername *string       `json:"to_username"`
	AmountUSD  *httpx.Amount `json:"amount_usd"`
	Memo       *string       `json:"memo"`
	Chain      *string       `json:"chain"`
}

// send answers 200 with the Transfer once both legs are included
// (status completed), or with status pending when inclusion outlasts the
// wait (the worker completes it). With an Idempotency-Key a retry gets the
// first answer again, marked Idempotent-Replayed: true.
func (s *server) send(w http.ResponseWriter, r *http.Request) {
	s.sendTo(w, r, false)
}

// sendToUser is send to a human user's custodial wallet (POST
// /agents/me/wallet/send-to-user): every rule of send, to_user in the
// answer.
func (s *server) sendToUser(w http.ResponseWriter, r *http.Request) {
	s.sendTo(w, r, true)
}

func (s *server) sendTo(w http.ResponseWriter, r *http.Request, toUser bool) {
	var body sendRequest
	if err := decodeJSON(r, &body); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	if body.ToUsername == nil {
		writeError(w, r, s.logger, areaAgent, agentpay.Invalid("to_username", "is required"))
		return
	}
	if body.AmountUSD == nil {
		writeError(w, r, s.logger, areaAgent, agentpay.Invalid("amount_usd", "is required"))
		return
	}
	req := agentpay.SendRequest{ToUsername: *body.ToUsername, ToUser: toUser, AmountUSD: body.AmountUSD.Decimal}
	if body.Memo != nil {
		req.Memo = *body.Memo
	}
	if body.Chain != nil {
		req.Chain = *body.Chain
	}
	var err error
	if req.IdempotencyKey, err = idempotencyKey(r); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	res, replayed, err := s.svc.Send(r.Context(), agentFrom(r.Context()), req)
	if replayed {
		w.Header().Set(httpx.IdempotentReplayedHeader, "true")
	}
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	if res.Approval != nil {
		// Held by a paired human's spending policy: accepted, not done.
		writeJSON(w, http.StatusAccepted, httpx.ApprovalOf(res.Approval, res.Message))
		return
	}
	writeJSON(w, http.StatusOK, httpx.TransferOf(res, toUser))
}

// idempotencyKey is the request's Idempotency-Key, nil when absent. The
// header may be given once only (the IETF draft's rule): two keys would
// leave which one counts to chance.
func idempotencyKey(r *http.Request) (*string, error) {
	values := r.Header.Values(httpx.IdempotencyKeyHeader)
	switch len(values) {
	case 0:
		return nil, nil
	case 1:
		return &values[0], nil
	default:
		return nil, agentpay.Invalid(httpx.IdempotencyKeyHeader, "must be given once")
	}
}

func (s *server) myBalance(w http.ResponseWriter, r *http.Request) {
	b, err := s.svc.Balance(r.Context(), agentFrom(r.Context()))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, httpx.BalanceOf(b))
}
