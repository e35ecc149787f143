package rest

import (
	"net/http"
	"time"

	"agentpay"
	"agentpay/internal/httpx"
)

type faucetRequest struct {
	Chain     string       `json:"chain"`
	Address   string       `json:"address"`
	AmountUSD httpx.Amount `json:"amount_usd"`
}

type faucetResponse struct {
	TxHash      string       `json:"tx_hash"`
	Chain       string       `json:"chain"`
	Address     string       `json:"address"`
	AmountUSD   httpx.Amount `json:"amount_usd"`
	FromAddress string       `json:"from_address"`
}

// devFaucet sends test USDC (design.md section 5). Its errors are 422 like
// the checkout API's, since it serves the people testing checkouts.
func (s *server) devFaucet(w http.ResponseWriter, r *http.Request) {
	var req faucetRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	res, err := s.svc.DevFaucet(r.Context(), agentpay.FaucetRequest{
		Chain: req.Chain, Address: req.Address, AmountUSD: req.AmountUSD.Decimal,
	})
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, faucetResponse{
		TxHash: res.TxHash, Chain: string(res.Chain), Address: res.Address,
		AmountUSD: httpx.Amount{Decimal: res.AmountUSD}, FromAddress: res.From,
	})
}

type devChain struct {
	Chain   string  `json:"chain"`
	RPCURL  string  `json:"rpc_url"`
	ChainID *uint64 `json:"chain_id,omitempty"`
	USDC    string  `json:"usdc"`
}

func (s *server) devChains(w http.ResponseWriter, r *http.Request) {
	list := s.svc.DevChains()
	out := make([]devChain, 0, len(list))
	for _, c := range list {
		dc := devChain{Chain: string(c.Chain), RPCURL: c.RPCURL, USDC: c.USDC}
		if c.Chain.IsEVM() {
			id := c.ChainID
			dc.ChainID = &id
		}
		out = append(out, dc)
	}
	writeJSON(w, http.StatusOK, out)
}

type devMailMessage struct {
	ID      string     `json:"id"`
	To      string     `json:"to"`
	Subject string     `json:"subject"`
	Text    string     `json:"text"`
	HTML    string     `json:"html"`
	Links   []string   `json:"links"`
	SentAt  *time.Time `json:"sent_at"`
}

type devMailResponse struct {
	Messages []devMailMessage `json:"messages"`
}

// devMail is the mail catcher's inbox of one address (design.md section 5):
// what `agentpay dev` caught for it, newest first, with the links of each
// text part to follow. A missing address is 400, like the human and agent
// APIs the mail belongs to.
func (s *server) devMail(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.DevMail(r.Context(), r.URL.Query().Get("to"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	out := devMailResponse{Messages: make([]devMailMessage, 0, len(list))}
	for _, m := range list {
		sent := m.At.UTC()
		out.Messages = append(out.Messages, devMailMessage{
			ID: m.ID, To: m.To, Subject: m.Subject, Text: m.Text, HTML: m.HTML,
			Links: agentpay.MailLinks(m.Text), SentAt: &sent,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

type devCardChargeRequest struct {
	CardNumber   string       `json:"card_number"`
	ExpMonth     int          `json:"exp_month"`
	ExpYear      int          `json:"exp_year"`
	CVC          string       `json:"cvc"`
	AmountUSD    httpx.Amount `json:"amount_usd"`
	MerchantName string       `json:"merchant_name"`
}

type devCardChargeResponse struct {
	Approved    bool          `json:"approved"`
	Reason      string        `json:"decline_reason,omitempty"`
	RequestID   string        `json:"request_id,omitempty"`
	ChargedUSD  *httpx.Amount `json:"charged_usd,omitempty"`
	ReturnedUSD *httpx.Amount `json:"returned_usd,omitempty"`
}

// devCardCharge plays the merchant's card network for sandbox cards
// (docs/identity-and-cards.md): 200 with approved, or declined and the
// reason; 422 for a malformed charge.
func (s *server) devCardCharge(w http.ResponseWriter, r *http.Request) {
	var req devCardChargeRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	res, err := s.svc.ChargeDevCard(r.Context(), agentpay.DevCardCharge{
		CardNumber: req.CardNumber, ExpMonth: req.ExpMonth, ExpYear: req.ExpYear, CVC: req.CVC,
		AmountUSD: req.AmountUSD.Decimal, MerchantName: req.MerchantName,
	})
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	out := devCardChargeResponse{Approved: res.Approved, Reason: res.Reason}
	if res.Approved {
		out.RequestID = res.RequestID.String()
		out.ChargedUSD, out.ReturnedUSD = &httpx.Amount{Decimal: res.Charged}, &httpx.Amount{Decimal: res.Returned}
	}
	writeJSON(w, http.StatusOK, out)
}
