package graph

import (
	"agentpay"
	"agentpay/graph/model"
)

// sessionStatusModel is a session status update as GraphQL shows it.
func sessionStatusModel(u agentpay.SessionStatusUpdate) *model.SessionStatus {
	m := &model.SessionStatus{
		ExternalID:    u.ExternalID,
		Status:        u.Status,
		AmountPaid:    u.AmountPaid,
		Confirmations: int(min(u.Confirmations, uint64(1<<31-1))),
		State:         string(u.Progress.State),
		AmountDue:     u.Progress.Due,
		AmountExcess:  u.Progress.Excess,
	}
	if u.Chain != "" {
		m.Chain = &u.Chain
	}
	if u.Token != "" {
		m.Token = &u.Token
	}
	if u.Required != nil {
		req := int(min(*u.Required, uint64(1<<31-1)))
		m.RequiredConfirmations = &req
	}
	return m
}
