package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/cardissuer/sandbox"
	"agentpay/ent/cardrequest"
	"agentpay/internal/testenv"
)

// TestWorkerExpiresCardRequests runs the River client and checks the
// periodic cards job ends a pending request past its deadline (expired,
// told to both parties); the rules are agentpay's TestCardDenyAndExpire.
func TestWorkerExpiresCardRequests(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, testenv.New(t, testenv.Options{Jobs: true}), agentpay.Config{CardIssuer: sandbox.New()})
	db := h.db
	reg, err := h.svc.QuickRegister(ctx, "cardworker")
	require.NoError(t, err)
	u, err := h.svc.CreateUser(ctx, agentpay.NewUser{Email: "cardworker@example.com", Username: "cardworkerhuman"})
	require.NoError(t, err)
	r := db.Ent.CardRequest.Create().SetAgentID(reg.Agent.ID).SetUserID(u.ID).SetAmount(1_000_000).
		SetMerchantName("Acme").SetIssuer(sandbox.Name).SetExpiresAt(time.Now().Add(-time.Second).UTC()).SaveX(ctx)

	stop := h.startWorker(t, Config{})
	require.Eventually(t, func() bool {
		got, err := db.Ent.CardRequest.Get(ctx, r.ID)
		return err == nil && got.Status == cardrequest.StatusExpired
	}, 20*time.Second, 50*time.Millisecond)
	evs, err := h.svc.AccountEvents(ctx, agentpay.AgentParty(reg.Agent.ID), 0, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, agentpay.EventCardExpired, evs[0].Kind)
	stop()
}
