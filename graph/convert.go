package graph

import (
	"strings"

	"agentpay"
	"agentpay/graph/model"
)

func chainModel(st agentpay.ChainStatus) *model.Chain {
	c := &model.Chain{Name: string(st.Chain), Mode: modeModel(st.Mode), Token: st.Token, Healthy: st.Healthy}
	if st.Healthy {
		head := st.Head
		c.Head = &head
	}
	return c
}

// enumOf is a service's lower-case status as the hand-written GraphQL enum
// E spells it (awaiting_approval -> AWAITING_APPROVAL), as the ent enums
// are spelled (docs/architecture.md, "GraphQL naming"); REST keeps the
// lower-case value.
func enumOf[E ~string](s string) E {
	return E(strings.ToUpper(s))
}
