package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/stepup"
	"agentpay/graph/model"
)

func pairingModel(v *agentpay.PairingView) *model.Pairing {
	p := v.Pairing
	return &model.Pairing{
		ID: p.ID, UserID: p.UserID, Username: v.User.Username, DisplayName: v.User.DisplayName,
		Status: enumOf[model.PairingStatus](v.Status), KycVerified: v.KYCVerified(), Message: p.Message,
		CreatedAt: p.CreatedAt, DecidedAt: p.DecidedAt, ExpiresAt: p.ExpiresAt,
	}
}

// accountEventModel decodes the event's data with numbers kept as written
// (json.Number), so amounts stay exact, and the actions its message names
// in GraphQL's words.
func accountEventModel(ev agentpay.AccountEvent) (*model.AccountEvent, error) {
	var data map[string]any
	dec := json.NewDecoder(strings.NewReader(renderGraphQL(string(ev.Data))))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("account event %d: %w", ev.ID, err)
	}
	return &model.AccountEvent{ID: ev.ID, Kind: ev.Kind, Data: data, CreatedAt: ev.CreatedAt}, nil
}

// accountEvents lists a party's events for Me.events and Viewer.events.
func (r *Resolver) accountEvents(ctx context.Context, of agentpay.Party, after *int64, limit *int) ([]*model.AccountEvent, error) {
	var from int64
	if after != nil {
		from = *after
	}
	evs, err := r.cfg.Service.AccountEvents(ctx, of, from, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*model.AccountEvent, len(evs))
	for i, ev := range evs {
		if out[i], err = accountEventModel(ev); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// accountEventStream is the agentEvents and viewerEvents subscriptions'
// stream of a watch: it ends when the watch does (ctx, or the credential
// that opened it: the service ends the watch).
func accountEventStream(ctx context.Context, evs <-chan agentpay.AccountEvent) <-chan *model.AccountEvent {
	out := make(chan *model.AccountEvent)
	go func() {
		defer close(out)
		for ev := range evs {
			m, err := accountEventModel(ev)
			if err != nil {
				continue // accountevents.go writes JSON objects: cannot happen
			}
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func viewerModel(v *agentpay.Viewer, wallets []*ent.Wallet) *model.Viewer {
	u := v.User
	out := &model.Viewer{ID: u.ID, Username: u.Username, DisplayName: u.DisplayName, Email: u.Email,
		IdentityStatus: u.IdentityStatus, Wallets: make([]*model.ViewerWallet, len(wallets))}
	for i, w := range wallets {
		out.Wallets[i] = &model.ViewerWallet{Chain: w.Chain, Address: w.Address}
	}
	return out
}

func viewerPairingModel(v *agentpay.PairingView) *model.ViewerPairing {
	p := v.Pairing
	return &model.ViewerPairing{
		ID: p.ID, AgentID: p.AgentID, AgentUsername: v.Agent.Username, Status: enumOf[model.PairingStatus](v.Status), Message: p.Message,
		CreatedAt: p.CreatedAt, DecidedAt: p.DecidedAt, ExpiresAt: p.ExpiresAt,
	}
}

// pairingConsentModel is a newcomer's pairing as the agent's other
// humans see it.
func pairingConsentModel(v *agentpay.PairingView) *model.PairingConsent {
	p := v.Pairing
	return &model.PairingConsent{
		ID: p.ID, AgentUsername: v.Agent.Username, Username: v.User.Username, DisplayName: v.User.DisplayName,
		Status: enumOf[model.PairingStatus](v.Status), CreatedAt: p.CreatedAt, ExpiresAt: p.ExpiresAt,
	}
}

// pairingDecisions maps the GraphQL enum to the service's moves.
var pairingDecisions = map[model.PairingDecision]agentpay.PairingDecision{
	model.PairingDecisionApprove: agentpay.ApprovePairing,
	model.PairingDecisionDeny:    agentpay.DenyPairing,
	model.PairingDecisionRevoke:  agentpay.RevokePairing,
}

func withdrawRequest(in model.WithdrawInput) agentpay.WithdrawRequest {
	req := agentpay.WithdrawRequest{ToAddress: in.ToAddress, AmountUSD: in.AmountUsd, IdempotencyKey: in.IdempotencyKey}
	if in.Chain != nil {
		req.Chain = *in.Chain
	}
	if in.Memo != nil {
		req.Memo = *in.Memo
	}
	req.StepUp = stepUpProof(in.CeremonyID, in.Credential)
	return req
}

// stepUpProof is an action's ceremonyId and credential (stepups.go).
func stepUpProof(ceremonyID *uuid.UUID, credential *string) agentpay.StepUpProof {
	var p agentpay.StepUpProof
	if ceremonyID != nil {
		p.ID = ceremonyID.String()
	}
	if credential != nil {
		p.Credential = []byte(*credential)
	}
	return p
}

// viewerStepUpModel is a step-up as the app reads it (no id nor method
// when the action needs none).
func viewerStepUpModel(up *agentpay.StepUp) (*model.ViewerStepUp, error) {
	out := &model.ViewerStepUp{Confirmed: up.Confirmed, Used: up.Used, Summary: up.Summary}
	if up.Method == "" {
		return out, nil
	}
	id, method, expires := up.ID, stepup.Method(up.Method), up.ExpiresAt
	out.ID, out.Method, out.ExpiresAt = &id, &method, &expires
	if up.SentTo != "" {
		out.SentTo = &up.SentTo
	}
	if len(up.Options) > 0 {
		var options map[string]any
		dec := json.NewDecoder(bytes.NewReader(up.Options))
		dec.UseNumber()
		if err := dec.Decode(&options); err != nil {
			return nil, fmt.Errorf("passkey options: %w", err)
		}
		out.Options = options
	}
	return out, nil
}

func withdrawalModel(w *agentpay.Withdrawal) *model.Withdrawal {
	t := w.Transfer
	var why *string
	if w.Status == "failed" {
		why = nonEmpty(t.Error)
	}
	return &model.Withdrawal{
		ID: t.ID, Chain: string(w.Chain), ToAddress: w.ToAddress,
		AmountUsd: w.Amount, FeeUsd: w.Fee, DeliveredUsd: w.Delivered,
		TxHash: nonEmpty(w.TxHash), FeeTxHash: nonEmpty(w.FeeTxHash), TxURL: nonEmpty(w.TxURL), Error: why,
		Status: enumOf[model.WithdrawalStatus](w.Status), Message: w.Message, Memo: nonEmpty(t.Memo),
		CreatedAt: t.CreatedAt, CompletedAt: t.CompletedAt,
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func viewerSessionModel(s agentpay.BrowserSessionView) *model.ViewerSession {
	return &model.ViewerSession{ID: s.Session.ID, UserAgent: s.Session.UserAgent, CreatedAt: s.Session.CreatedAt,
		ExpiresAt: s.Session.ExpiresAt, Current: s.Current}
}

// passkeyRegistrationModel decodes the options with numbers kept as
// written (json.Number), as the service encoded them.
func passkeyRegistrationModel(c *agentpay.PasskeyCeremony) (*model.PasskeyRegistration, error) {
	var options map[string]any
	dec := json.NewDecoder(bytes.NewReader(c.Options))
	dec.UseNumber()
	if err := dec.Decode(&options); err != nil {
		return nil, fmt.Errorf("passkey options: %w", err)
	}
	return &model.PasskeyRegistration{CeremonyID: c.ID, Options: options, ExpiresAt: c.ExpiresAt}, nil
}
