package graph

import (
	"agentpay"
	"agentpay/graph/model"
)

func chainModel(st agentpay.ChainStatus) *model.Chain {
	c := &model.Chain{Name: string(st.Chain), Mode: string(st.Mode), Token: st.Token, Healthy: st.Healthy}
	if st.Healthy {
		head := st.Head
		c.Head = &head
	}
	return c
}
