package agentpay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent/mailmessage"
)

// TestRemindApprovals: the deciders are reminded once, when a quarter of
// an approval's time is left (a card request's 30 minutes: at 22.5; a held
// operation's hour: at 45), never before, never twice (the job run again),
// never for one decided or past its deadline; the reminder says it is one
// and links where the first mail did.
func TestRemindApprovals(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2")})
	held, err := e.send("3")
	require.NoError(t, err)
	require.Equal(t, "awaiting_approval", held.Status)
	denied, err := e.send("4")
	require.NoError(t, err)
	_, err = e.svc.DenySpendApproval(ctx, &Viewer{User: e.u}, denied.Approval.Approval.ID.String())
	require.NoError(t, err)
	card := e.request(t, e.a, "1")
	require.Equal(t, "pending_approval", string(card.Request.Status))

	reminders := func() []string {
		ms, err := e.db.Ent.MailMessage.Query().Where(mailmessage.ToEqualFold(e.u.Email),
			mailmessage.SubjectHasPrefix("Reminder: ")).All(ctx)
		require.NoError(t, err)
		var texts []string
		for _, m := range ms {
			texts = append(texts, m.Text)
		}
		return texts
	}
	remind := func(want int, why string) {
		t.Helper()
		n, err := e.svc.RemindApprovals(ctx)
		require.NoError(t, err)
		require.Equal(t, want, n, why)
	}

	e.clock.Advance(22 * time.Minute)
	remind(0, "more than a quarter of the card request's 30 minutes left")
	require.Empty(t, reminders())

	e.clock.Advance(time.Minute)
	remind(1, "the card request, at 23 of its 30 minutes")
	remind(0, "once")
	got := reminders()
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0], "Reminder: this still waits for your decision and expires at "), got[0])
	require.Contains(t, got[0], e.svc.cfg.AppURL+"/#cards")

	e.clock.Advance(21 * time.Minute)
	remind(0, "the held operation has more than 15 of its 60 minutes left")
	e.clock.Advance(2 * time.Minute)
	remind(1, "the held operation at 46 minutes; the denied one never, the card request is past its deadline")
	remind(0, "once")
	got = reminders()
	require.Len(t, got, 2)
	spend := got[0]
	if !strings.Contains(spend, "/#spend-approvals") {
		spend = got[1]
	}
	require.Contains(t, spend, e.svc.cfg.AppURL+"/#spend-approvals")
	require.Contains(t, spend, "asks you to approve: send 3.00 USD")

	e.clock.Advance(time.Hour)
	remind(0, "past every deadline")
}
