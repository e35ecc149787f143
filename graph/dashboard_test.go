package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/mailmessage"
	"agentpay/ent/payment"
	"agentpay/internal/httpx"
)

// The operations of this file, in one place.
const (
	dashMerchantsQuery = `{ viewer { merchants { id name role members { email role acceptedAt } } } }`
	dashOpenMutation   = `mutation($m: ID!, $mode: Mode!) { openDashboard(merchantId: $m, mode: $mode) { token expiresAt merchantId merchantName mode role } }`
	dashInviteMutation = `mutation($m: ID!, $e: String!, $r: MemberRole!) { inviteMerchantMember(merchantId: $m, email: $e, role: $r) { id email role acceptedAt } }`
	dashRemoveMutation = `mutation($m: ID!, $id: ID!) { removeMerchantMember(merchantId: $m, memberId: $id) }`
	dashSessionsQuery  = `{ merchant { id } sessions { totalCount edges { node { externalId livemode } } } }`
	dashMerchantQuery  = `{ merchant { id } }`
	dashSearchQuery    = `query($s: String!) { sessions(where: {search: $s}) { totalCount } }`
	dashCreateSession  = `mutation { createSession(input: {amount: "12.50", currency: "USD", metadata: {order: "A-17"}}) { externalId livemode } }`
	dashRollKeys       = `mutation($mode: Mode) { rollKeys(mode: $mode) { publicKey secretKey livemode warning } }`
	dashVolumeQuery    = `query($from: Time!, $to: Time!) { paymentVolume(from: $from, to: $to) { day chain status count volume } }`
	dashTestWebhook    = `mutation { sendTestWebhook { id eventType livemode deliveries { id } } }`
)

type openedDashboard struct {
	Token        string
	MerchantID   string
	MerchantName string
	Mode         string
	Role         string
}

// openDashboard opens a dashboard session as a signed-in viewer.
func (a *viewerAPI) openDashboard(t *testing.T, session, csrf string, merchantId uuid.UUID, mode string) openedDashboard {
	t.Helper()
	var d struct{ OpenDashboard openedDashboard }
	a.asViewer(t, session, csrf, dashOpenMutation, map[string]any{"m": merchantId, "mode": mode}).decode(t, &d)
	require.NotEmpty(t, d.OpenDashboard.Token)
	return d.OpenDashboard
}

// asDashboard posts an operation with X-Dashboard-Session.
func (a *viewerAPI) asDashboard(t *testing.T, token, q string, vars map[string]any) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, a.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpx.DashboardSessionHeader, token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out gqlResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func TestDashboardSessionOverGraphQL(t *testing.T) {
	api := newViewerAPI(t)
	ctx := context.Background()
	owner, ownerSession, ownerCSRF := api.signIn(t, "dash_owner")
	reg, err := api.Svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: ptr("Dash Shop"), Email: ptr(owner.Email)})
	require.NoError(t, err)
	shop := reg.Merchant
	var ms struct {
		Viewer struct {
			Merchants []struct {
				ID, Name, Role string
				Members        []struct{ Email, Role string }
			}
		}
	}
	api.asViewer(t, ownerSession, ownerCSRF, dashMerchantsQuery, nil).decode(t, &ms)
	require.Empty(t, ms.Viewer.Merchants, "not before the contact e-mail is confirmed")
	api.confirmContactEmail(t, owner.Email)
	other, err := api.Svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: ptr("Other Shop"), Email: ptr("other@example.com")})
	require.NoError(t, err)

	// The contact e-mail's account manages the merchant, as its owner.
	api.asViewer(t, ownerSession, ownerCSRF, dashMerchantsQuery, nil).decode(t, &ms)
	require.Len(t, ms.Viewer.Merchants, 1)
	require.Equal(t, shop.ID.String(), ms.Viewer.Merchants[0].ID)
	require.Equal(t, "OWNER", ms.Viewer.Merchants[0].Role)

	// A test-mode dashboard session: the merchant's test state, as a test
	// secret key sees it.
	liveAuth, err := api.Svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	amount := decimal.RequireFromString("3.00")
	_, err = api.Svc.CreateSession(ctx, liveAuth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
	require.NoError(t, err)
	dash := api.openDashboard(t, ownerSession, ownerCSRF, shop.ID, "TEST")
	require.Equal(t, "OWNER", dash.Role)
	require.Equal(t, "TEST", dash.Mode)
	var created struct{ CreateSession struct{ ExternalID string } }
	api.asDashboard(t, dash.Token, dashCreateSession, nil).decode(t, &created)
	var page struct {
		Merchant struct{ ID string }
		Sessions struct {
			TotalCount int
			Edges      []struct{ Node struct{ ExternalID string } }
		}
	}
	api.asDashboard(t, dash.Token, dashSessionsQuery, nil).decode(t, &page)
	require.Equal(t, shop.ID.String(), page.Merchant.ID)
	require.Equal(t, 1, page.Sessions.TotalCount, "test sessions only")
	require.Equal(t, created.CreateSession.ExternalID, page.Sessions.Edges[0].Node.ExternalID)
	for term, want := range map[string]int{created.CreateSession.ExternalID: 1, "A-17": 1, "A-18": 0} {
		var found struct{ Sessions struct{ TotalCount int } }
		api.asDashboard(t, dash.Token, dashSearchQuery, map[string]any{"s": term}).decode(t, &found)
		require.Equal(t, want, found.Sessions.TotalCount, term)
	}
	require.Equal(t, "FORBIDDEN", api.asDashboard(t, dash.Token, dashRollKeys, map[string]any{"mode": "LIVE"}).code(t),
		"a test dashboard session rolls no live keys")
	var rolled struct{ RollKeys struct{ SecretKey string } }
	api.asDashboard(t, dash.Token, dashRollKeys, nil).decode(t, &rolled)
	_, err = api.Svc.AuthenticateMerchant(ctx, rolled.RollKeys.SecretKey)
	require.NoError(t, err, "the rolled test key works")
	_, err = api.Svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.ErrorIs(t, err, agentpay.ErrUnauthorized, "the old one no longer")

	// Over a websocket, in the connection_init payload.
	c := dialWS(t, api.URL, nil)
	c.init(map[string]any{"X-Dashboard-Session": dash.Token})
	var m struct{ Merchant struct{ ID string } }
	c.operation("1", dashMerchantQuery).decode(t, &m)
	require.Equal(t, shop.ID.String(), m.Merchant.ID)

	// Not a member; not a session.
	require.Equal(t, "FORBIDDEN", api.asViewer(t, ownerSession, ownerCSRF, dashOpenMutation,
		map[string]any{"m": other.Merchant.ID, "mode": "TEST"}).code(t))
	require.Equal(t, "UNAUTHENTICATED", api.asDashboard(t, "ds_wrong", dashMerchantQuery, nil).code(t))
	require.Equal(t, "UNAUTHENTICATED", api.asViewer(t, "", "", dashOpenMutation,
		map[string]any{"m": shop.ID, "mode": "TEST"}).code(t))

	// A read-only member reads and changes nothing.
	reader, readerSession, readerCSRF := api.signIn(t, "dash_reader")
	var inv struct{ InviteMerchantMember struct{ ID, Role string } }
	api.asViewer(t, ownerSession, ownerCSRF, dashInviteMutation,
		map[string]any{"m": shop.ID, "e": reader.Email, "r": "READ_ONLY"}).decode(t, &inv)
	require.Equal(t, "FORBIDDEN", api.asViewer(t, readerSession, readerCSRF, dashInviteMutation,
		map[string]any{"m": shop.ID, "e": "x@example.com", "r": "OWNER"}).code(t), "read-only members invite nobody")
	ro := api.openDashboard(t, readerSession, readerCSRF, shop.ID, "TEST")
	require.Equal(t, "READ_ONLY", ro.Role)
	api.asDashboard(t, ro.Token, dashSessionsQuery, nil).decode(t, &page)
	require.Equal(t, 1, page.Sessions.TotalCount)
	for _, q := range []string{dashCreateSession, `mutation { rollKeys { secretKey } }`, dashTestWebhook,
		`mutation { updateMerchant(input: {webhookUrl: ""}) { id } }`} {
		require.Equal(t, "FORBIDDEN", api.asDashboard(t, ro.Token, q, nil).code(t), q)
	}

	// Removing the member ends its session; signing the browser out ends
	// the owner's.
	var removed struct{ RemoveMerchantMember bool }
	api.asViewer(t, ownerSession, ownerCSRF, dashRemoveMutation, map[string]any{"m": shop.ID, "id": inv.InviteMerchantMember.ID}).decode(t, &removed)
	require.True(t, removed.RemoveMerchantMember)
	require.Equal(t, "UNAUTHENTICATED", api.asDashboard(t, ro.Token, dashMerchantQuery, nil).code(t))
	v, err := api.Svc.AuthenticateBrowser(ctx, ownerSession)
	require.NoError(t, err)
	require.NoError(t, api.Svc.SignOut(ctx, v, false))
	require.Equal(t, "UNAUTHENTICATED", api.asDashboard(t, dash.Token, dashMerchantQuery, nil).code(t))
}

func TestPaymentVolumeOverGraphQL(t *testing.T) {
	vapi := newViewerAPI(t)
	api := &merchantAPI{URL: vapi.URL, DB: vapi.DB, Svc: vapi.Svc}
	m := api.register(t, "Volume Shop", agentpay.MerchantInput{})
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ids := api.createSessions(t, m.Keys.TestSecretKey, 3, day)
	api.recordPayment(t, ids[0], 1_500_000, payment.StatusConfirmed, day.Add(time.Hour))
	api.recordPayment(t, ids[1], 2_250_001, payment.StatusConfirmed, day.Add(23*time.Hour))
	api.recordPayment(t, ids[2], 700_000, payment.StatusConfirming, day.Add(25*time.Hour))
	liveIDs := api.createSessions(t, m.Keys.LiveSecretKey, 1, day)
	api.recordPayment(t, liveIDs[0], 9_000_000, payment.StatusConfirmed, day.Add(time.Hour))

	var d struct {
		PaymentVolume []struct {
			Day, Chain, Status string
			Count              int
			Volume             json.Number
		}
	}
	api.do(t, m.Keys.TestSecretKey, dashVolumeQuery, map[string]any{"from": day.Add(-24 * time.Hour), "to": day.Add(72 * time.Hour)}).decode(t, &d)
	require.Len(t, d.PaymentVolume, 2)
	require.Equal(t, "2026-11-20", d.PaymentVolume[0].Day)
	require.Equal(t, "base", d.PaymentVolume[0].Chain)
	require.Equal(t, "CONFIRMED", d.PaymentVolume[0].Status)
	require.Equal(t, 2, d.PaymentVolume[0].Count)
	require.Equal(t, "3.750001", d.PaymentVolume[0].Volume.String(), "exact, test mode only")
	require.Equal(t, "2026-11-21", d.PaymentVolume[1].Day)
	require.Equal(t, "CONFIRMING", d.PaymentVolume[1].Status)
	require.Equal(t, "0.7", d.PaymentVolume[1].Volume.String())
	require.Equal(t, "BAD_USER_INPUT", api.do(t, m.Keys.TestSecretKey, dashVolumeQuery,
		map[string]any{"from": day, "to": day.Add(-time.Hour)}).code(t))
}

func TestSendTestWebhookOverGraphQL(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Hook Shop", agentpay.MerchantInput{})
	require.Equal(t, "BAD_USER_INPUT", api.do(t, m.Keys.TestSecretKey, dashTestWebhook, nil).code(t), "no endpoint yet")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(receiver.Close)
	var upd struct{ UpdateMerchant struct{ ID string } }
	api.do(t, m.Keys.TestSecretKey, `mutation($u: String!) { updateMerchant(input: {webhookUrl: $u}) { id } }`,
		map[string]any{"u": receiver.URL + "/hooks"}).decode(t, &upd)
	var d struct {
		SendTestWebhook struct {
			ID, EventType string
			Livemode      bool
			Deliveries    []struct{ ID string }
		}
	}
	api.do(t, m.Keys.TestSecretKey, dashTestWebhook, nil).decode(t, &d)
	require.Equal(t, agentpay.EventWebhookTest, d.SendTestWebhook.EventType)
	require.False(t, d.SendTestWebhook.Livemode, "the credential's mode")
	require.Len(t, d.SendTestWebhook.Deliveries, 1, "delivered like any event")
	require.Equal(t, "BAD_USER_INPUT", api.do(t, m.Keys.LiveSecretKey, dashTestWebhook, nil).code(t), "live mode has no endpoint")
}

// The contact e-mail over GraphQL, changed from the dashboard (the owner's
// live dashboard session, as app/static/dashboard.js does) and with a
// secret key: a new address owns nothing until its confirmation link is
// followed, the previous one stops owning the merchant at the change (its
// dashboard session ends), and past the day's confirmations of one
// merchant a change is RATE_LIMITED.
func TestContactEmailChangeOverGraphQL(t *testing.T) {
	api := newViewerAPI(t)
	ctx := context.Background()
	owner, ownerSession, ownerCSRF := api.signIn(t, uniqueName(t, "first"))
	reg, err := api.Svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: ptr("Mail Shop"), Email: ptr(owner.Email)})
	require.NoError(t, err)
	api.confirmContactEmail(t, owner.Email)
	ds := api.openDashboard(t, ownerSession, ownerCSRF, reg.Merchant.ID, "LIVE")
	require.Equal(t, "OWNER", ds.Role)
	next, nextSession, nextCSRF := api.signIn(t, uniqueName(t, "next"))

	res := api.asDashboard(t, ds.Token, `mutation($e: String!) { updateMerchant(input: {email: $e}) { email } }`, map[string]any{"e": next.Email})
	require.Empty(t, res.Errors)
	require.JSONEq(t, `{"updateMerchant": {"email": "`+next.Email+`"}}`, string(res.Data))
	require.Equal(t, "UNAUTHENTICATED", api.asDashboard(t, ds.Token, dashMerchantQuery, nil).code(t),
		"the previous address's ownership, and its dashboard session, ended with the change")
	merchantsOf := func(session, csrf string) int {
		var ms struct {
			Viewer struct{ Merchants []struct{ ID string } }
		}
		api.asViewer(t, session, csrf, dashMerchantsQuery, nil).decode(t, &ms)
		return len(ms.Viewer.Merchants)
	}
	require.Zero(t, merchantsOf(ownerSession, ownerCSRF))
	require.Zero(t, merchantsOf(nextSession, nextCSRF), "the new address owns nothing before its confirmation")
	api.confirmContactEmail(t, next.Email)
	require.Equal(t, 1, merchantsOf(nextSession, nextCSRF))

	// With the live secret key: registration and this change made two
	// confirmations; three more, then RATE_LIMITED.
	const change = `mutation($e: String!) { updateMerchant(input: {email: $e}) { email } }`
	merchant := &merchantAPI{URL: api.URL, DB: api.DB, Svc: api.Svc}
	for i := range agentpay.MerchantEmailConfirmationsPerDay - 2 {
		res := merchant.do(t, reg.Keys.LiveSecretKey, change, map[string]any{"e": fmt.Sprintf("later%d@example.com", i)})
		require.Empty(t, res.Errors, "change %d", i)
	}
	require.Equal(t, "RATE_LIMITED", merchant.do(t, reg.Keys.LiveSecretKey, change, map[string]any{"e": "victim@example.com"}).code(t))
	n, err := api.DB.Ent.MailMessage.Query().Where(mailmessage.To("victim@example.com")).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// inviteHuman's limits over GraphQL: FORBIDDEN for an address that opted
// out of the agent's mail, RATE_LIMITED past its day of mail from agents.
func TestInviteHumanLimitsOverGraphQL(t *testing.T) {
	api := newViewerAPIWith(t, agentpay.Config{AgentMailDailyLimit: 1})
	ctx := context.Background()
	keys := make([]string, 2)
	for i := range keys {
		reg := api.register(t, uniqueName(t, "lim"))
		aid := uuid.MustParse(reg.AgentID)
		require.NoError(t, api.DB.Ent.Agent.UpdateOneID(aid).
			SetPartnerVerified(true).SetExternalWalletVerified(true).SetHumanVerified(true).Exec(ctx))
		require.NoError(t, api.Svc.RecomputeTrust(ctx, aid))
		keys[i] = reg.APIKey
	}
	const invite = `mutation($e: String!) { inviteHuman(email: $e) { id } }`
	require.Empty(t, api.do(t, keys[0], invite, map[string]any{"e": "ann@example.com"}).Errors)
	require.Equal(t, "RATE_LIMITED", api.do(t, keys[1], invite, map[string]any{"e": "ann@example.com"}).code(t))

	require.Empty(t, api.do(t, keys[0], invite, map[string]any{"e": "bea@example.com"}).Errors)
	m, err := api.DB.Ent.MailMessage.Query().Where(mailmessage.To("bea@example.com")).Only(ctx)
	require.NoError(t, err)
	var token string
	for _, l := range agentpay.MailLinks(m.Text) {
		if i := strings.Index(l, "/unsubscribe/"); i >= 0 {
			token = l[i+len("/unsubscribe/"):]
		}
	}
	_, err = api.Svc.Unsubscribe(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "FORBIDDEN", api.do(t, keys[1], invite, map[string]any{"e": "bea@example.com"}).code(t))
}
