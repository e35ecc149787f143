package graph

import (
	"agentpay"
	"agentpay/ent"
	"agentpay/graph/model"
)

// The merchant dashboard's types (dashboard.graphql) as the service has
// them.

func serviceMode(m model.Mode) agentpay.Mode {
	if m == model.ModeLive {
		return agentpay.ModeLive
	}
	return agentpay.ModeTest
}

// modeModel is a service mode as GraphQL spells it.
func modeModel(m agentpay.Mode) model.Mode {
	if m == agentpay.ModeLive {
		return model.ModeLive
	}
	return model.ModeTest
}

func serviceRole(r model.MemberRole) agentpay.MemberRole {
	if r == model.MemberRoleOwner {
		return agentpay.RoleOwner
	}
	return agentpay.RoleReadOnly
}

func memberRole(r agentpay.MemberRole) model.MemberRole {
	if r == agentpay.RoleOwner {
		return model.MemberRoleOwner
	}
	return model.MemberRoleReadOnly
}

func merchantTeamMember(m *ent.MerchantMember) *model.MerchantTeamMember {
	return &model.MerchantTeamMember{
		ID: m.ID, Email: m.Email, Role: memberRole(agentpay.MemberRole(m.Role)),
		AcceptedAt: m.AcceptedAt, CreatedAt: m.CreatedAt,
	}
}

func merchantTeamMembers(ms []*ent.MerchantMember) []*model.MerchantTeamMember {
	out := make([]*model.MerchantTeamMember, len(ms))
	for i, m := range ms {
		out[i] = merchantTeamMember(m)
	}
	return out
}
