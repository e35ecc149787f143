package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/spendapproval"
	"agentpay/internal/testenv"
)

// TestWorkerExpiresSpendApprovals runs the River client and checks the
// periodic expire_spend_approvals job ends a held operation past its
// deadline (expired, told to the agent) on its own, with no card issuer
// configured; the rules are agentpay's TestSpendingPolicyApprovals.
func TestWorkerExpiresSpendApprovals(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, testenv.New(t, testenv.Options{Jobs: true}), agentpay.Config{})
	db := h.db
	reg, err := h.svc.QuickRegister(ctx, "approvalworker")
	require.NoError(t, err)
	r := db.Ent.SpendApproval.Create().SetAgentID(reg.Agent.ID).SetOperation(spendapproval.OperationSend).
		SetRequest(`{}`).SetAmount(3_000_000).SetRecipient("someone").SetReason("above the approval threshold of 2 USD").
		SetExpiresAt(time.Now().Add(-time.Second).UTC()).SaveX(ctx)

	stop := h.startWorker(t, Config{})
	require.Eventually(t, func() bool {
		got, err := db.Ent.SpendApproval.Get(ctx, r.ID)
		return err == nil && got.Status == spendapproval.StatusExpired
	}, 20*time.Second, 50*time.Millisecond)
	evs, err := h.svc.AccountEvents(ctx, agentpay.AgentParty(reg.Agent.ID), 0, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, agentpay.EventApprovalExpired, evs[0].Kind)
	stop()
}
