package graph

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/ent/transfer"
	"agentpay/internal/testenv"
)

const withdrawMutation = `mutation($in: WithdrawInput!) { withdraw(input: $in) {
	id chain toAddress amountUsd feeUsd deliveredUsd txHash feeTxHash status message memo replayed } }`

type withdrawalData struct {
	ID, Chain, ToAddress, Status, Message string
	AmountUsd, FeeUsd, DeliveredUsd       json.Number
	TxHash, FeeTxHash, Memo               *string
	Replayed                              bool
}

// TestWithdrawOverGraphQL: a signed-in human withdraws with the session
// cookie and CSRF token; without the token nothing moves; the same
// idempotencyKey answers the first withdrawal again, another input with it
// is refused; a bad address is BAD_USER_INPUT; viewer.withdrawals lists
// what went, newest first.
func TestWithdrawOverGraphQL(t *testing.T) {
	env := testenv.New(t, testenv.Options{Jobs: true, Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	srv := newTestServer(t, env, agentpay.Config{AgentMode: agentpay.ModeTest}, HandlerConfig{})
	api := &viewerAPI{agentAPI: &agentAPI{URL: srv.URL, DB: env.DB, Svc: srv.Svc}, env: env}
	ctx := context.Background()
	u, session, csrf := api.signIn(t, uniqueName(t, "ann"))
	ws, err := api.Svc.UserWallets(ctx, u)
	require.NoError(t, err)
	var own string
	for _, w := range ws {
		if w.Chain == "base" {
			own = w.Address
		}
	}
	env.Fund(t, chains.Base, own, 10_000_000)
	_, to, err := env.Families[chains.FamilyEVM].NewKey()
	require.NoError(t, err)

	count := func() int {
		n, err := api.DB.Ent.Transfer.Query().Where(transfer.FromUserID(u.ID)).Count(ctx)
		require.NoError(t, err)
		return n
	}
	in := map[string]any{"toAddress": to, "amountUsd": 4, "memo": "out", "idempotencyKey": "wd-1"}
	// confirmed begins the step-up of a withdrawal (without a passkey, a
	// link e-mailed to the account) and follows the link, as its page
	// would, answering the input with the step-up's id.
	confirmed := func(in map[string]any) map[string]any {
		t.Helper()
		var up struct {
			BeginStepUp struct {
				ID, Method, SentTo string
			}
		}
		api.asViewer(t, session, csrf, `mutation($in: StepUpInput!) { beginStepUp(input: $in) { id method sentTo } }`,
			map[string]any{"in": map[string]any{"action": "WITHDRAW", "withdrawal": in}}).decode(t, &up)
		require.Equal(t, "EMAIL", up.BeginStepUp.Method)
		require.Equal(t, u.Email, up.BeginStepUp.SentTo)
		m, err := api.DB.Ent.MailMessage.Query().Where(mailmessage.To(u.Email), mailmessage.SubjectHasPrefix("Confirm: ")).
			Order(ent.Desc(mailmessage.FieldCreatedAt), ent.Desc(mailmessage.FieldID)).First(ctx)
		require.NoError(t, err)
		link := agentpay.MailLinks(m.Text)[0]
		_, err = api.Svc.ConfirmStepUpLink(ctx, link[strings.LastIndex(link, "/")+1:])
		require.NoError(t, err)
		out := maps.Clone(in)
		out["ceremonyId"] = up.BeginStepUp.ID
		return out
	}

	// Without the CSRF token, or without a session: refused, nothing moves.
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", withdrawMutation, map[string]any{"in": in}).code(t))
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "nope", withdrawMutation, map[string]any{"in": in}).code(t))
	require.Equal(t, "UNAUTHENTICATED", api.asViewer(t, "", csrf, withdrawMutation, map[string]any{"in": in}).code(t))
	// Without a step-up: refused, nothing moves.
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, csrf, withdrawMutation, map[string]any{"in": map[string]any{"toAddress": to, "amountUsd": 4}}).code(t))
	require.Zero(t, count())

	var first, again struct{ Withdraw withdrawalData }
	api.asViewer(t, session, csrf, withdrawMutation, map[string]any{"in": confirmed(in)}).decode(t, &first)
	w := first.Withdraw
	require.Equal(t, "COMPLETED", w.Status)
	require.Equal(t, "base", w.Chain)
	require.Equal(t, to, w.ToAddress)
	require.Equal(t, "4", w.AmountUsd.String())
	require.Equal(t, "0.004", w.FeeUsd.String())
	require.Equal(t, "3.996", w.DeliveredUsd.String())
	require.NotNil(t, w.TxHash)
	require.NotNil(t, w.FeeTxHash)
	require.Equal(t, "out", *w.Memo)
	require.False(t, w.Replayed)
	require.Contains(t, w.Message, "3.996 USDC delivered")

	api.asViewer(t, session, csrf, withdrawMutation, map[string]any{"in": in}).decode(t, &again)
	require.True(t, again.Withdraw.Replayed)
	again.Withdraw.Replayed = false
	require.Equal(t, first, again, "the first answer")
	require.Equal(t, 1, count(), "withdrawn once")

	other := map[string]any{"toAddress": to, "amountUsd": 5, "idempotencyKey": "wd-1"}
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", api.asViewer(t, session, csrf, withdrawMutation, map[string]any{"in": other}).code(t))

	for _, bad := range []map[string]any{
		{"toAddress": "0x1234", "amountUsd": 1},
		{"toAddress": own, "amountUsd": 1},
		{"toAddress": to, "amountUsd": 0.001},
		{"toAddress": to, "amountUsd": 1, "chain": "polygon"},
	} {
		out := api.asViewer(t, session, csrf, withdrawMutation, map[string]any{"in": bad})
		require.Equal(t, "BAD_USER_INPUT", out.code(t), "%v", bad)
	}
	out := api.asViewer(t, session, csrf, withdrawMutation, map[string]any{"in": confirmed(map[string]any{"toAddress": to, "amountUsd": 7})})
	require.Equal(t, "INSUFFICIENT_FUNDS", out.code(t))
	require.Equal(t, 1, count(), "nothing else moved")

	var second struct{ Withdraw withdrawalData }
	api.asViewer(t, session, csrf, withdrawMutation, map[string]any{"in": confirmed(map[string]any{"toAddress": to, "amountUsd": 1, "chain": "base"})}).decode(t, &second)
	require.Equal(t, "COMPLETED", second.Withdraw.Status)

	var list struct {
		Viewer struct {
			Withdrawals []withdrawalData
			Balance     struct{ TotalUsd json.Number }
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { balance { totalUsd } withdrawals(limit: 10) {
		id chain toAddress amountUsd feeUsd deliveredUsd txHash feeTxHash status message memo replayed } } }`, nil).decode(t, &list)
	require.Len(t, list.Viewer.Withdrawals, 2)
	require.Equal(t, second.Withdraw.ID, list.Viewer.Withdrawals[0].ID, "newest first")
	require.Equal(t, w.ID, list.Viewer.Withdrawals[1].ID)
	require.Equal(t, "5", list.Viewer.Balance.TotalUsd.String())
	require.Equal(t, "BAD_USER_INPUT", api.asViewer(t, session, csrf, `{ viewer { withdrawals(limit: 101) { id } } }`, nil).code(t))
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", `{ viewer { withdrawals { id } } }`, nil).code(t))
}
