package graph

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/httpx"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
)

// merchantAPI is a GraphQL server over a real database with no chains, as
// the merchant dashboard operations need none. Webhook jobs go to an
// insert-only River client, the way the API process runs; tests make the
// tries themselves with DeliverWebhook.
type merchantAPI struct {
	URL string
	DB  *store.DB
	Svc *agentpay.Service
}

// newMerchantAPI builds the server; with tweaks changing the service's
// configuration first. Its webhook receivers are on loopback, which test
// mode may reach (testenv.Env.Fill).
func newMerchantAPI(t *testing.T, tweaks ...func(*agentpay.Config)) *merchantAPI {
	t.Helper()
	return newMerchantAPIIn(t, testenv.Options{Jobs: true}, tweaks...)
}

// newMerchantAPIIn is newMerchantAPI on a bundle built with opts.
func newMerchantAPIIn(t *testing.T, opts testenv.Options, tweaks ...func(*agentpay.Config)) *merchantAPI {
	t.Helper()
	env := testenv.New(t, opts)
	cfg := agentpay.Config{}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	srv := newTestServer(t, env, cfg, HandlerConfig{})
	return &merchantAPI{URL: srv.URL, DB: env.DB, Svc: srv.Svc}
}

// testMerchant is a registered merchant with its keys.
type testMerchant struct {
	ID       uuid.UUID
	Keys     agentpay.MerchantKeys
	Merchant *ent.Merchant // as registered
}

func (a *merchantAPI) register(t *testing.T, name string, in agentpay.MerchantInput) testMerchant {
	t.Helper()
	email := "owner@example.com"
	in.Name, in.Email = &name, &email
	reg, err := a.Svc.RegisterMerchant(context.Background(), in)
	require.NoError(t, err)
	return testMerchant{ID: reg.Merchant.ID, Keys: reg.Keys, Merchant: reg.Merchant}
}

// auth is the merchant as the service sees a caller with key.
func (a *merchantAPI) auth(t *testing.T, key string) *agentpay.MerchantAuth {
	t.Helper()
	auth, err := a.Svc.AuthenticateMerchant(context.Background(), key)
	require.NoError(t, err)
	return auth
}

// do posts a GraphQL operation with X-Checkout-Secret-Key when key is set.
func (a *merchantAPI) do(t *testing.T, key, q string, vars map[string]any) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, a.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(httpx.MerchantKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out gqlResult
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	require.NoError(t, dec.Decode(&out))
	return out
}

// createSessions creates n sessions of amounts 1.00, 2.00, ... with key,
// their created_at moved to base + i minutes (oldest first) so the order
// and the date filters have exact answers. It returns their external ids,
// oldest first.
func (a *merchantAPI) createSessions(t *testing.T, key string, n int, base time.Time) []string {
	t.Helper()
	ctx := context.Background()
	auth := a.auth(t, key)
	ids := make([]string, n)
	for i := range n {
		amount := decimal.NewFromInt(int64(i + 1))
		created, err := a.Svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		require.NoError(t, err)
		a.setCreatedAt(t, "checkout_sessions", created.Session.ID, base.Add(time.Duration(i)*time.Minute))
		ids[i] = created.Session.ExternalID
	}
	return ids
}

func ptr[T any](v T) *T { return &v }

// setCreatedAt moves a row's created_at (immutable in ent, so by SQL), so
// orders and date filters have exact answers.
func (a *merchantAPI) setCreatedAt(t *testing.T, table string, id uuid.UUID, at time.Time) {
	t.Helper()
	q := "UPDATE " + table + " SET created_at = ? WHERE id = ?"
	if a.DB.IsPostgres() {
		q = "UPDATE " + table + " SET created_at = $1 WHERE id = $2"
	}
	res, err := a.DB.SQL.ExecContext(context.Background(), q, at.UTC(), id)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// recordPayment stores a payment of a session the way the deposit scan
// does (a row per on-chain transfer) and moves the session to detecting,
// what an underpayment leaves.
func (a *merchantAPI) recordPayment(t *testing.T, externalID string, units int64, status payment.Status, at time.Time) *ent.Payment {
	t.Helper()
	ctx := context.Background()
	sess, err := a.Svc.SessionByExternalID(ctx, externalID)
	require.NoError(t, err)
	require.NoError(t, a.DB.Ent.CheckoutSession.UpdateOne(sess).SetStatus(checkoutsession.StatusDetecting).Exec(ctx))
	p, err := a.DB.Ent.Payment.Create().
		SetSessionID(sess.ID).
		SetExternalID("pay_" + strings.ReplaceAll(uuid.NewString(), "-", "")).
		SetChain("base").
		SetTxHash("0x" + strings.Repeat(strings.ReplaceAll(uuid.NewString(), "-", ""), 2)).
		SetLogIndex(0).
		SetFromAddress("0x1111111111111111111111111111111111111111").
		SetToAddress("0x2222222222222222222222222222222222222222").
		SetAmountToken(units).
		SetAmountUsd(decimal.New(units, -agentpay.USDCDecimals)).
		SetBlockNumber(100).
		SetStatus(status).
		SetCreatedAt(at).
		SetUpdatedAt(at).
		Save(ctx)
	require.NoError(t, err)
	return p
}

// recordEvent records a webhook event of a session the way a state change
// does (RecordEvent inside a transaction), with a delivery when the
// merchant has a webhook URL.
func (a *merchantAPI) recordEvent(t *testing.T, merchantID uuid.UUID, live bool, kind, sessionExternalID string) *ent.WebhookEvent {
	t.Helper()
	var ev *ent.WebhookEvent
	err := a.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		sess, err := tx.CheckoutSession.Query().Where(checkoutsession.ExternalID(sessionExternalID)).Only(ctx)
		if err != nil {
			return err
		}
		ev, err = a.Svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{
			MerchantID: merchantID, SessionID: &sess.ID, Type: kind, Livemode: live,
			Data: agentpay.EventData{SessionExternalID: sessionExternalID, Metadata: map[string]any{"order_id": "A-1"}},
		})
		return err
	})
	require.NoError(t, err)
	return ev
}

type pageInfo struct {
	HasNextPage, HasPreviousPage bool
	StartCursor, EndCursor       *string
}

type sessionNode struct {
	ID, ExternalID, Status, Currency, CheckoutURL, EmbedURL string
	Livemode                                                bool
	AmountUsd                                               json.Number
	CreatedAt                                               time.Time
	Metadata                                                map[string]any
	IdempotencyKey                                          *string
	Description                                             *string
}

const sessionFields = `id externalId status currency livemode amountUsd createdAt metadata idempotencyKey description checkoutUrl embedUrl`

type sessionsPage struct {
	Sessions struct {
		TotalCount int
		PageInfo   pageInfo
		Edges      []struct {
			Cursor string
			Node   sessionNode
		}
	}
}

func (p sessionsPage) externalIDs() []string {
	out := make([]string, len(p.Sessions.Edges))
	for i, e := range p.Sessions.Edges {
		out[i] = e.Node.ExternalID
	}
	return out
}

const sessionsQuery = `query($first: Int, $after: Cursor, $last: Int, $before: Cursor, $where: SessionFilter) {
	sessions(first: $first, after: $after, last: $last, before: $before, where: $where) {
		totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
		edges { cursor node { ` + sessionFields + ` } } } }`

// reversed returns ids newest first.
func reversed(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[len(ids)-1-i] = id
	}
	return out
}

func TestMerchantQueryAndAuth(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Profile Shop", agentpay.MerchantInput{})
	const q = `{ merchant { id name email active settlementType webhookUrl brandColor
		acceptedTokens { chain token } publicKeys { live test } keys { kind publicKey } } }`

	var d struct {
		Merchant struct {
			ID, Name, Email, SettlementType string
			Active                          bool
			WebhookURL, BrandColor          *string
			AcceptedTokens                  []struct{ Chain, Token string }
			PublicKeys                      struct{ Live, Test string }
			Keys                            []struct{ Kind, PublicKey string }
		}
	}
	for _, key := range []string{m.Keys.TestSecretKey, m.Keys.LiveSecretKey} {
		api.do(t, key, q, nil).decode(t, &d)
		require.Equal(t, m.ID.String(), d.Merchant.ID)
		require.Equal(t, "Profile Shop", d.Merchant.Name)
		require.Equal(t, "owner@example.com", d.Merchant.Email)
		require.Equal(t, "CRYPTO_USDC", d.Merchant.SettlementType)
		require.True(t, d.Merchant.Active)
		// Unset optional strings of ent types are null, as on REST.
		require.Nil(t, d.Merchant.WebhookURL)
		require.Nil(t, d.Merchant.BrandColor)
		require.Len(t, d.Merchant.AcceptedTokens, 5, "the default: USDC on every chain")
		require.Equal(t, "base", d.Merchant.AcceptedTokens[0].Chain)
		require.Equal(t, m.Keys.LivePublicKey, d.Merchant.PublicKeys.Live)
		require.Equal(t, m.Keys.TestPublicKey, d.Merchant.PublicKeys.Test)
		require.Equal(t, []struct{ Kind, PublicKey string }{
			{"LIVE", m.Keys.LivePublicKey}, {"TEST", m.Keys.TestPublicKey},
		}, d.Merchant.Keys)
	}

	// Keys that do not authenticate: missing, malformed, a public key, an
	// agent's header only.
	for name, key := range map[string]string{
		"none": "", "malformed": "sk_test_nope", "public key": m.Keys.TestPublicKey,
		"unknown": "sk_test_" + strings.Repeat("a", 43),
	} {
		require.Equal(t, "UNAUTHENTICATED", api.do(t, key, q, nil).code(t), name)
	}

	// A rolled key is refused at once, the new one works and sees the
	// same merchant; a test key rolls the test pair only.
	newKeys, err := api.Svc.RollMerchantKeys(context.Background(), api.auth(t, m.Keys.TestSecretKey), "")
	require.NoError(t, err)
	require.Empty(t, newKeys.LiveSecretKey)
	require.Equal(t, "UNAUTHENTICATED", api.do(t, m.Keys.TestSecretKey, q, nil).code(t))
	api.do(t, newKeys.TestSecretKey, q, nil).decode(t, &d)
	require.Equal(t, m.ID.String(), d.Merchant.ID)
	require.Len(t, d.Merchant.Keys, 2, "rolled keys are not listed")
	require.Equal(t, newKeys.TestPublicKey, d.Merchant.PublicKeys.Test)
	require.Equal(t, m.Keys.LivePublicKey, d.Merchant.PublicKeys.Live)

	// A deactivated merchant is refused on every operation, with REST's 403
	// detail; reactivated, it works again.
	_, err = api.Svc.DeactivateMerchant(context.Background(), m.ID)
	require.NoError(t, err)
	ops := []struct {
		q    string
		vars map[string]any
	}{
		{q, nil},
		{sessionsQuery, nil},
		{`{ payments { totalCount } }`, nil},
		{`{ webhookEvents { totalCount } }`, nil},
		{`mutation { createSession(input: {amount: 5, currency: "USD"}) { id } }`, nil},
		{`mutation { updateMerchant(input: {name: "New"}) { id } }`, nil},
		{`mutation { rollWebhookSecret { webhookSecret } }`, nil},
		{`mutation { cancelSession(externalId: "cs_test_x") { id } }`, nil},
		{`query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": m.ID.String()}},
	}
	for _, op := range ops {
		out := api.do(t, newKeys.TestSecretKey, op.q, op.vars)
		require.Equal(t, "FORBIDDEN", out.code(t), op.q)
		require.Equal(t, "insufficient permissions: merchant is deactivated", out.Errors[0].Message)
	}
	_, err = api.Svc.ReactivateMerchant(context.Background(), m.ID)
	require.NoError(t, err)
	api.do(t, m.Keys.LiveSecretKey, q, nil).decode(t, &d)
	require.True(t, d.Merchant.Active)
}

func TestMerchantWebsocketAuth(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Socket Shop", agentpay.MerchantInput{})
	for name, payload := range map[string]map[string]any{
		"top level": {"X-Checkout-Secret-Key": m.Keys.TestSecretKey},
		"headers":   {"headers": map[string]any{"x-checkout-secret-key": m.Keys.TestSecretKey}},
	} {
		t.Run(name, func(t *testing.T) {
			c := dialWS(t, api.URL, nil)
			c.init(payload)
			var d struct{ Merchant struct{ ID string } }
			c.operation("1", `{ merchant { id } }`).decode(t, &d)
			require.Equal(t, m.ID.String(), d.Merchant.ID)
		})
	}
	t.Run("upgrade request header", func(t *testing.T) {
		c := dialWS(t, api.URL, http.Header{httpx.MerchantKeyHeader: {m.Keys.LiveSecretKey}})
		c.init(map[string]any{})
		var d struct{ Merchant struct{ ID string } }
		c.operation("1", `{ merchant { id } }`).decode(t, &d)
		require.Equal(t, m.ID.String(), d.Merchant.ID)
	})
	t.Run("no key", func(t *testing.T) {
		c := dialWS(t, api.URL, nil)
		c.init(map[string]any{})
		require.Equal(t, "UNAUTHENTICATED", c.operation("1", `{ merchant { id } }`).code(t))
	})
	for name, key := range map[string]string{"bad key": "sk_test_wrong", "deactivated": ""} {
		t.Run(name+" closes the connection", func(t *testing.T) {
			if key == "" {
				other := api.register(t, "Gone Shop", agentpay.MerchantInput{})
				_, err := api.Svc.DeactivateMerchant(context.Background(), other.ID)
				require.NoError(t, err)
				key = other.Keys.TestSecretKey
			}
			c := dialWS(t, api.URL, nil)
			c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"X-Checkout-Secret-Key": key}})
			var closeErr *websocket.CloseError
			for {
				if _, err := c.read(); err != nil {
					require.ErrorAs(t, err, &closeErr)
					break
				}
			}
			require.Equal(t, 4403, closeErr.Code)
		})
	}
}

func TestMerchantSessionsPagination(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Paging Shop", agentpay.MerchantInput{})
	other := api.register(t, "Other Shop", agentpay.MerchantInput{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	test := api.createSessions(t, m.Keys.TestSecretKey, 7, base)
	live := api.createSessions(t, m.Keys.LiveSecretKey, 2, base)
	api.createSessions(t, other.Keys.TestSecretKey, 3, base)
	newest := reversed(test)

	// Forward: first 3 after each end cursor, newest first.
	var pages [][]string
	var after any
	for {
		var p sessionsPage
		api.do(t, m.Keys.TestSecretKey, sessionsQuery, map[string]any{"first": 3, "after": after}).decode(t, &p)
		require.Equal(t, 7, p.Sessions.TotalCount)
		pages = append(pages, p.externalIDs())
		if !p.Sessions.PageInfo.HasNextPage {
			break
		}
		require.Less(t, len(pages), 4, "the walk must end")
		after = *p.Sessions.PageInfo.EndCursor
	}
	require.Equal(t, [][]string{newest[0:3], newest[3:6], newest[6:7]}, pages)

	// Backward: last 3 before each start cursor.
	pages = nil
	var before any
	for {
		var p sessionsPage
		api.do(t, m.Keys.TestSecretKey, sessionsQuery, map[string]any{"last": 3, "before": before}).decode(t, &p)
		require.Equal(t, 7, p.Sessions.TotalCount)
		pages = append(pages, p.externalIDs())
		if !p.Sessions.PageInfo.HasPreviousPage {
			break
		}
		require.Less(t, len(pages), 4, "the walk must end")
		before = *p.Sessions.PageInfo.StartCursor
	}
	require.Equal(t, [][]string{newest[4:7], newest[1:4], newest[0:1]}, pages)

	// Default page size (20) and the live key's own list.
	var p sessionsPage
	api.do(t, m.Keys.TestSecretKey, sessionsQuery, nil).decode(t, &p)
	require.Equal(t, newest, p.externalIDs())
	require.False(t, p.Sessions.PageInfo.HasNextPage)
	for i, e := range p.Sessions.Edges {
		n := e.Node
		require.False(t, n.Livemode)
		require.Equal(t, fmt.Sprint(7-i), n.AmountUsd.String())
		require.True(t, base.Add(time.Duration(6-i)*time.Minute).Equal(n.CreatedAt), n.CreatedAt)
		require.Equal(t, "http://pay.test/pay/"+n.ExternalID, n.CheckoutURL)
		require.Equal(t, "http://pay.test/pay/"+n.ExternalID+"/embed", n.EmbedURL)
	}
	api.do(t, m.Keys.LiveSecretKey, sessionsQuery, nil).decode(t, &p)
	require.Equal(t, reversed(live), p.externalIDs())
	require.Equal(t, 2, p.Sessions.TotalCount)
	require.True(t, p.Sessions.Edges[0].Node.Livemode)

	// Page sizes out of range are the service's validation errors.
	for _, vars := range []map[string]any{{"first": 101}, {"last": 101}, {"first": -1}} {
		out := api.do(t, m.Keys.TestSecretKey, sessionsQuery, vars)
		require.Equal(t, "BAD_USER_INPUT", out.code(t), vars)
	}
	out := api.do(t, m.Keys.TestSecretKey, sessionsQuery, map[string]any{"first": 2, "after": "not a cursor"})
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
}

func TestMerchantSessionFilters(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Filter Shop", agentpay.MerchantInput{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ids := api.createSessions(t, m.Keys.TestSecretKey, 6, base) // at base+0..5 minutes
	// Live sessions in the same range never show to the test key.
	api.createSessions(t, m.Keys.LiveSecretKey, 3, base)
	auth := api.auth(t, m.Keys.TestSecretKey)
	for _, id := range []string{ids[1], ids[4]} {
		_, err := api.Svc.CancelSession(context.Background(), auth, id)
		require.NoError(t, err)
	}
	api.recordPayment(t, ids[2], 1_000_000, payment.StatusDetected, base) // detecting
	at := func(min int) string { return base.Add(time.Duration(min) * time.Minute).Format(time.RFC3339Nano) }

	tests := []struct {
		name  string
		where map[string]any
		want  []string // oldest first
		code  string
	}{
		{"no filter", nil, ids, ""},
		{"empty filter", map[string]any{}, ids, ""},
		{"status cancelled", map[string]any{"status": []string{"CANCELLED"}}, []string{ids[1], ids[4]}, ""},
		{"status pending or detecting", map[string]any{"status": []string{"PENDING", "DETECTING"}}, []string{ids[0], ids[2], ids[3], ids[5]}, ""},
		{"status confirmed: none", map[string]any{"status": []string{"CONFIRMED"}}, []string{}, ""},
		{"created from (inclusive)", map[string]any{"createdFrom": at(3)}, ids[3:], ""},
		{"created to (exclusive)", map[string]any{"createdTo": at(2)}, ids[:2], ""},
		{"created range", map[string]any{"createdFrom": at(1), "createdTo": at(4)}, ids[1:4], ""},
		{"range and status", map[string]any{"createdFrom": at(1), "createdTo": at(5), "status": []string{"CANCELLED"}}, []string{ids[1], ids[4]}, ""},
		{"empty range", map[string]any{"createdFrom": at(2), "createdTo": at(2)}, []string{}, ""},
		{"range in another zone", map[string]any{"createdFrom": base.Add(3 * time.Minute).In(time.FixedZone("X", -3*3600)).Format(time.RFC3339)}, ids[3:], ""},
		{"to before from", map[string]any{"createdFrom": at(3), "createdTo": at(1)}, nil, "BAD_USER_INPUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := api.do(t, m.Keys.TestSecretKey, sessionsQuery, map[string]any{"where": tc.where})
			if tc.want == nil {
				require.NotEmpty(t, out.Errors)
				if tc.code != "" {
					require.Equal(t, tc.code, out.code(t))
				}
				return
			}
			var p sessionsPage
			out.decode(t, &p)
			require.Equal(t, reversed(tc.want), p.externalIDs())
			require.Equal(t, len(tc.want), p.Sessions.TotalCount)
		})
	}

	// A filtered walk: 2 per page over the 4 pending or detecting sessions.
	where := map[string]any{"status": []string{"PENDING", "DETECTING"}}
	var got []string
	var after any
	for range 3 {
		var p sessionsPage
		api.do(t, m.Keys.TestSecretKey, sessionsQuery, map[string]any{"first": 2, "after": after, "where": where}).decode(t, &p)
		require.Equal(t, 4, p.Sessions.TotalCount)
		got = append(got, p.externalIDs()...)
		if !p.Sessions.PageInfo.HasNextPage {
			break
		}
		after = *p.Sessions.PageInfo.EndCursor
	}
	require.Equal(t, []string{ids[5], ids[3], ids[2], ids[0]}, got)
}

func TestMerchantIsolation(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Own Shop", agentpay.MerchantInput{})
	other := api.register(t, "Other Shop", agentpay.MerchantInput{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mine := api.createSessions(t, m.Keys.TestSecretKey, 2, base)
	myLive := api.createSessions(t, m.Keys.LiveSecretKey, 1, base)
	theirs := api.createSessions(t, other.Keys.TestSecretKey, 1, base)
	myPay := api.recordPayment(t, mine[0], 500_000, payment.StatusConfirming, base)
	theirPay := api.recordPayment(t, theirs[0], 500_000, payment.StatusConfirming, base)
	liveEvent := api.recordEvent(t, m.ID, true, agentpay.EventSessionExpired, myLive[0])
	theirEvent := api.recordEvent(t, other.ID, false, agentpay.EventSessionExpired, theirs[0])
	myEvent := api.recordEvent(t, m.ID, false, agentpay.EventSessionExpired, mine[1])
	key := m.Keys.TestSecretKey

	const sessionQuery = `query($id: String!) { session(externalId: $id) { id externalId livemode } }`
	var s struct {
		Session struct{ ID, ExternalID string }
	}
	api.do(t, key, sessionQuery, map[string]any{"id": mine[0]}).decode(t, &s)
	require.Equal(t, mine[0], s.Session.ExternalID)
	for name, id := range map[string]string{"other merchant": theirs[0], "other mode": myLive[0], "unknown": "cs_test_unknown"} {
		out := api.do(t, key, sessionQuery, map[string]any{"id": id})
		require.Equal(t, "NOT_FOUND", out.code(t), name)
		require.Equal(t, "not found: no such session", out.Errors[0].Message)
	}
	out := api.do(t, key, `mutation($id: String!) { cancelSession(externalId: $id) { id } }`, map[string]any{"id": theirs[0]})
	require.Equal(t, "NOT_FOUND", out.code(t))

	// node(): own objects of the key's mode resolve, nothing else does.
	nodeQuery := `query($id: ID!) { node(id: $id) { id __typename } }`
	theirSess, err := api.Svc.SessionByExternalID(context.Background(), theirs[0])
	require.NoError(t, err)
	liveSess, err := api.Svc.SessionByExternalID(context.Background(), myLive[0])
	require.NoError(t, err)
	mySess, err := api.Svc.SessionByExternalID(context.Background(), mine[0])
	require.NoError(t, err)
	for typ, id := range map[string]uuid.UUID{
		"Merchant": m.ID, "CheckoutSession": mySess.ID, "Payment": myPay.ID, "WebhookEvent": myEvent.ID,
	} {
		var d struct {
			Node struct {
				ID       string
				Typename string `json:"__typename"`
			}
		}
		api.do(t, key, nodeQuery, map[string]any{"id": id}).decode(t, &d)
		require.Equal(t, id.String(), d.Node.ID)
		require.Equal(t, typ, d.Node.Typename)
	}
	for name, id := range map[string]uuid.UUID{
		"other merchant": other.ID, "their session": theirSess.ID, "their payment": theirPay.ID,
		"their event": theirEvent.ID, "my live session": liveSess.ID, "my live event": liveEvent.ID,
	} {
		require.Equal(t, "NOT_FOUND", api.do(t, key, nodeQuery, map[string]any{"id": id}).code(t), name)
	}
	// Anonymous callers see nothing.
	require.Equal(t, "NOT_FOUND", api.do(t, "", nodeQuery, map[string]any{"id": mySess.ID}).code(t))

	// The edges of the merchant object show the key's mode only.
	var d struct {
		Merchant struct {
			Sessions      []struct{ ExternalID string }
			WebhookEvents []struct{ ID string }
		}
	}
	api.do(t, key, `{ merchant { sessions { externalId } webhookEvents { id } } }`, nil).decode(t, &d)
	require.Len(t, d.Merchant.Sessions, 2)
	require.ElementsMatch(t, mine, []string{d.Merchant.Sessions[0].ExternalID, d.Merchant.Sessions[1].ExternalID})
	require.Len(t, d.Merchant.WebhookEvents, 1)
	require.Equal(t, myEvent.ID.String(), d.Merchant.WebhookEvents[0].ID)
	var viaSession struct {
		Session struct {
			Merchant struct{ Sessions []struct{ Livemode bool } }
		}
	}
	api.do(t, key, `query($id: String!) { session(externalId: $id) { merchant { sessions { livemode } } } }`,
		map[string]any{"id": mine[0]}).decode(t, &viaSession)
	require.Len(t, viaSession.Session.Merchant.Sessions, 2)
	var live struct {
		Sessions struct {
			Edges []struct {
				Node struct {
					Merchant struct{ Sessions []struct{ ExternalID string } }
				}
			}
		}
	}
	api.do(t, m.Keys.LiveSecretKey, `{ sessions { edges { node { merchant { sessions { externalId } } } } } }`, nil).decode(t, &live)
	require.Len(t, live.Sessions.Edges, 1)
	require.Equal(t, myLive, []string{live.Sessions.Edges[0].Node.Merchant.Sessions[0].ExternalID})

	// Lists: the other merchant's payments and events never show.
	var pays struct{ Payments struct{ TotalCount int } }
	api.do(t, key, `{ payments { totalCount } }`, nil).decode(t, &pays)
	require.Equal(t, 1, pays.Payments.TotalCount)
	out = api.do(t, key, `query($id: ID!) { webhookEvent(id: $id) { id } }`, map[string]any{"id": theirEvent.ID})
	require.Equal(t, "NOT_FOUND", out.code(t))
	out = api.do(t, key, `query($id: ID!) { webhookEvent(id: $id) { id } }`, map[string]any{"id": liveEvent.ID})
	require.Equal(t, "NOT_FOUND", out.code(t))
}

const createSessionMutation = `mutation($in: CreateSessionInput!) { createSession(input: $in) { ` + sessionFields + ` } }`

func TestMerchantCreateSession(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Create Shop", agentpay.MerchantInput{})
	key := m.Keys.TestSecretKey

	var d struct{ CreateSession sessionNode }
	api.do(t, key, createSessionMutation, map[string]any{"in": map[string]any{
		"amount": json.Number("12.34"), "currency": "usd", "description": "Two mugs",
		"metadata":       map[string]any{"order_id": "A-1", "qty": json.Number("2")},
		"idempotencyKey": "order-A-1",
	}}).decode(t, &d)
	s := d.CreateSession
	require.True(t, strings.HasPrefix(s.ExternalID, "cs_test_"), s.ExternalID)
	require.Equal(t, "12.34", s.AmountUsd.String())
	require.Equal(t, "USD", s.Currency)
	require.Equal(t, "PENDING", s.Status)
	require.False(t, s.Livemode)
	require.Equal(t, "Two mugs", *s.Description)
	require.Equal(t, "order-A-1", *s.IdempotencyKey)
	require.Equal(t, "A-1", s.Metadata["order_id"])
	require.EqualValues(t, 2, s.Metadata["qty"])
	require.Equal(t, "http://pay.test/pay/"+s.ExternalID, s.CheckoutURL)
	stored, err := api.Svc.SessionByExternalID(context.Background(), s.ExternalID)
	require.NoError(t, err)
	require.Equal(t, "12.34", stored.AmountUsd.String())

	tests := []struct {
		name string
		in   map[string]any
		code string
		msg  string
	}{
		{"amount too small", map[string]any{"amount": json.Number("0.49"), "currency": "USD"}, "BAD_USER_INPUT", "amount:"},
		{"amount too precise", map[string]any{"amount": json.Number("10.001"), "currency": "USD"}, "BAD_USER_INPUT", "amount:"},
		{"amount too large", map[string]any{"amount": json.Number("1000000.01"), "currency": "USD"}, "BAD_USER_INPUT", "amount:"},
		{"amount not a number", map[string]any{"amount": "ten", "currency": "USD"}, "BAD_USER_INPUT", ""},
		{"currency", map[string]any{"amount": 5, "currency": "EUR"}, "BAD_USER_INPUT", "currency:"},
		{"success url", map[string]any{"amount": 5, "currency": "USD", "successUrl": "ftp://x"}, "BAD_USER_INPUT", "success_url:"},
		{"inexact metadata number", map[string]any{"amount": 5, "currency": "USD", "metadata": map[string]any{"n": json.Number("12345678901234567891")}}, "BAD_USER_INPUT", "metadata.n:"},
		{"idempotency key reused", map[string]any{"amount": 99, "currency": "USD", "idempotencyKey": "order-A-1"}, "CONFLICT",
			`conflict: idempotency_key "order-A-1" was already used for session ` + s.ExternalID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := api.do(t, key, createSessionMutation, map[string]any{"in": tc.in})
			require.Equal(t, tc.code, out.code(t), out.Errors)
			require.Contains(t, out.Errors[0].Message, tc.msg)
		})
	}
	// Nothing was written by the refusals; the live key has its own
	// idempotency keys.
	var p sessionsPage
	api.do(t, key, sessionsQuery, nil).decode(t, &p)
	require.Equal(t, 1, p.Sessions.TotalCount)
	api.do(t, m.Keys.LiveSecretKey, createSessionMutation, map[string]any{"in": map[string]any{
		"amount": 5, "currency": "USD", "idempotencyKey": "order-A-1",
	}}).decode(t, &d)
	require.True(t, d.CreateSession.Livemode)
	require.True(t, strings.HasPrefix(d.CreateSession.ExternalID, "cs_live_"))
	require.Equal(t, "UNAUTHENTICATED", api.do(t, "", createSessionMutation, map[string]any{"in": map[string]any{"amount": 5, "currency": "USD"}}).code(t))
}

// TestMerchantCreateSessionOpenCap: createSession refuses a merchant that
// has MaxOpenSessions open sessions in the key's mode with RATE_LIMITED, as
// REST answers 429; a cancelled session frees its place.
func TestMerchantCreateSessionOpenCap(t *testing.T) {
	api := newMerchantAPI(t, func(c *agentpay.Config) { c.MaxOpenSessions = 2 })
	m := api.register(t, "Capped Shop", agentpay.MerchantInput{})
	key := m.Keys.LiveSecretKey
	in := map[string]any{"in": map[string]any{"amount": 5, "currency": "USD"}}
	var d struct{ CreateSession sessionNode }
	api.do(t, key, createSessionMutation, in).decode(t, &d)
	first := d.CreateSession.ExternalID
	api.do(t, key, createSessionMutation, in).decode(t, &d)

	out := api.do(t, key, createSessionMutation, in)
	require.Equal(t, "RATE_LIMITED", out.code(t), out.Errors)
	require.Contains(t, out.Errors[0].Message, "rate limit exceeded: 2 open live sessions, the most a merchant may have at once")
	api.do(t, m.Keys.TestSecretKey, createSessionMutation, in).decode(t, &d)
	require.False(t, d.CreateSession.Livemode, "test mode has its own")

	out = api.do(t, key, `mutation($id: String!) { cancelSession(externalId: $id) { status } }`, map[string]any{"id": first})
	require.Empty(t, out.Errors)
	api.do(t, key, createSessionMutation, in).decode(t, &d)
	require.True(t, d.CreateSession.Livemode, "a cancelled session frees its place")
}

func TestMerchantCancelSession(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Cancel Shop", agentpay.MerchantInput{})
	key := m.Keys.TestSecretKey
	ids := api.createSessions(t, key, 2, time.Now().UTC().Add(-time.Minute))
	const cancel = `mutation($id: String!) { cancelSession(externalId: $id) { externalId status } }`

	var d struct {
		CancelSession struct{ ExternalID, Status string }
	}
	api.do(t, key, cancel, map[string]any{"id": ids[0]}).decode(t, &d)
	require.Equal(t, "CANCELLED", d.CancelSession.Status)
	api.do(t, key, cancel, map[string]any{"id": ids[0]}).decode(t, &d) // a no-op
	require.Equal(t, "CANCELLED", d.CancelSession.Status)

	api.recordPayment(t, ids[1], 100_000, payment.StatusDetected, time.Now().UTC())
	out := api.do(t, key, cancel, map[string]any{"id": ids[1]})
	require.Equal(t, "CONFLICT", out.code(t))
	require.Contains(t, out.Errors[0].Message, "already has a payment")
	sess, err := api.Svc.SessionByExternalID(context.Background(), ids[1])
	require.NoError(t, err)
	require.Equal(t, checkoutsession.StatusDetecting, sess.Status, "unchanged")

	require.Equal(t, "NOT_FOUND", api.do(t, key, cancel, map[string]any{"id": "cs_test_unknown"}).code(t))
	require.Equal(t, "NOT_FOUND", api.do(t, m.Keys.LiveSecretKey, cancel, map[string]any{"id": ids[1]}).code(t), "the other mode")
}

func TestMerchantUpdateMerchant(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Update Shop", agentpay.MerchantInput{})
	const update = `mutation($in: UpdateMerchantInput!) { updateMerchant(input: $in) {
		id name brandColor webhookUrl website acceptedTokens { chain token } settleHeldPayments } }`
	type merchantData struct {
		ID, Name                        string
		BrandColor, WebhookURL, Website *string
		AcceptedTokens                  []struct{ Chain, Token string }
		SettleHeldPayments              bool
	}

	var d struct{ UpdateMerchant merchantData }
	api.do(t, m.Keys.LiveSecretKey, update, map[string]any{"in": map[string]any{
		"name": "  New Name ", "brandColor": "#AABBCC", "website": "https://shop.example",
		"acceptedTokens": []map[string]any{{"chain": "solana", "token": "USDC"}, {"chain": "base", "token": "USDC"}},
		"webhookUrl":     "https://shop.example/hooks", "settleHeldPayments": true, "settlementType": "CRYPTO_USDC",
	}}).decode(t, &d)
	require.Equal(t, "New Name", d.UpdateMerchant.Name)
	require.True(t, d.UpdateMerchant.SettleHeldPayments)
	require.Equal(t, "#aabbcc", *d.UpdateMerchant.BrandColor)
	require.Equal(t, "https://shop.example/hooks", *d.UpdateMerchant.WebhookURL)
	require.Equal(t, []struct{ Chain, Token string }{{"base", "USDC"}, {"solana", "USDC"}}, d.UpdateMerchant.AcceptedTokens)

	// Absent fields are unchanged, "" clears an optional one (read as null).
	api.do(t, m.Keys.LiveSecretKey, update, map[string]any{"in": map[string]any{"website": ""}}).decode(t, &d)
	require.Nil(t, d.UpdateMerchant.Website)
	require.Equal(t, "New Name", d.UpdateMerchant.Name)
	require.True(t, d.UpdateMerchant.SettleHeldPayments, "unchanged")
	require.Equal(t, "#aabbcc", *d.UpdateMerchant.BrandColor)

	// A test key sets test mode's webhook URL (a local receiver is
	// allowed) and sees it; the live key still sees live mode's.
	api.do(t, m.Keys.TestSecretKey, update, map[string]any{"in": map[string]any{"webhookUrl": "http://127.0.0.1:9/hook"}}).decode(t, &d)
	require.Equal(t, "http://127.0.0.1:9/hook", *d.UpdateMerchant.WebhookURL)
	var q struct{ Merchant struct{ WebhookURL *string } }
	api.do(t, m.Keys.LiveSecretKey, `{ merchant { webhookUrl } }`, nil).decode(t, &q)
	require.Equal(t, "https://shop.example/hooks", *q.Merchant.WebhookURL)
	api.do(t, m.Keys.TestSecretKey, `{ merchant { webhookUrl } }`, nil).decode(t, &q)
	require.Equal(t, "http://127.0.0.1:9/hook", *q.Merchant.WebhookURL)

	tests := []struct {
		name string
		key  string
		in   map[string]any
		code string
		msg  string
	}{
		{"brand color", m.Keys.LiveSecretKey, map[string]any{"brandColor": "red"}, "BAD_USER_INPUT", "brand_color:"},
		{"email", m.Keys.LiveSecretKey, map[string]any{"email": "not an address"}, "BAD_USER_INPUT", "email:"},
		{"name cleared", m.Keys.LiveSecretKey, map[string]any{"name": ""}, "BAD_USER_INPUT", "name:"},
		{"no accepted tokens", m.Keys.LiveSecretKey, map[string]any{"acceptedTokens": []any{}}, "BAD_USER_INPUT", "accepted_tokens:"},
		{"settlement chain without address", m.Keys.LiveSecretKey, map[string]any{"settlementChain": "base"}, "BAD_USER_INPUT", "settlement"},
		{"loopback webhook with a live key", m.Keys.LiveSecretKey, map[string]any{"webhookUrl": "http://127.0.0.1:9/hook"}, "BAD_USER_INPUT", "webhook_url:"},
		// A test key reaches test-mode state only.
		{"settlement address with a test key", m.Keys.TestSecretKey, map[string]any{"settlementAddress": "0x52908400098527886E0F7030069857D2E4169EE7"}, "FORBIDDEN",
			"insufficient permissions: a test key changes test-mode settings only (webhook_url); settlement_address need a live secret key"},
		{"settlement chain with a test key", m.Keys.TestSecretKey, map[string]any{"settlementChain": "base"}, "FORBIDDEN", "settlement_chain need a live secret key"},
		{"settlement type with a test key", m.Keys.TestSecretKey, map[string]any{"settlementType": "FIAT_PIX"}, "FORBIDDEN", "settlement_type need a live secret key"},
		{"settlement type spelled as REST does", m.Keys.LiveSecretKey, map[string]any{"settlementType": "crypto_usdc"}, "BAD_USER_INPUT", "crypto_usdc is not a valid SettlementType"},
		{"name with a test key", m.Keys.TestSecretKey, map[string]any{"name": "Evil"}, "FORBIDDEN", "name need a live secret key"},
		{"success url with a test key", m.Keys.TestSecretKey, map[string]any{"successUrl": "https://evil.example/ok"}, "FORBIDDEN", "success_url need a live secret key"},
		{"accepted tokens with a test key", m.Keys.TestSecretKey, map[string]any{"acceptedTokens": []map[string]any{{"chain": "base", "token": "USDC"}}}, "FORBIDDEN", "accepted_tokens need a live secret key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := api.do(t, tc.key, update, map[string]any{"in": tc.in})
			require.Equal(t, tc.code, out.code(t))
			require.Contains(t, out.Errors[0].Message, tc.msg)
		})
	}
	stored, err := api.Svc.MerchantByID(context.Background(), m.ID)
	require.NoError(t, err)
	require.Equal(t, "New Name", stored.Name, "refusals change nothing")
	require.Equal(t, "#aabbcc", stored.BrandColor)
	require.Empty(t, stored.SettlementAddress)
	require.Equal(t, "crypto_usdc", string(stored.SettlementType))
	require.Equal(t, "https://shop.example/hooks", stored.WebhookURL)
}

// TestMerchantRollWebhookSecret: rollWebhookSecret replaces the key's
// mode's secret, the rules of POST /checkout/merchants/me/webhook-secret/roll.
func TestMerchantRollWebhookSecret(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Roll Shop", agentpay.MerchantInput{})
	const roll = `mutation($s: Int) { rollWebhookSecret(overlapSeconds: $s) { webhookSecret livemode previousSecretExpiresAt warning } }`
	type rolled struct {
		WebhookSecret           string
		Livemode                bool
		PreviousSecretExpiresAt *time.Time
		Warning                 string
	}
	var d struct{ RollWebhookSecret rolled }
	before := time.Now()
	api.do(t, m.Keys.TestSecretKey, roll, nil).decode(t, &d)
	require.False(t, d.RollWebhookSecret.Livemode)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, d.RollWebhookSecret.WebhookSecret)
	require.NotEqual(t, m.Keys.TestWebhookSecret, d.RollWebhookSecret.WebhookSecret)
	require.WithinDuration(t, before.Add(24*time.Hour), *d.RollWebhookSecret.PreviousSecretExpiresAt, time.Minute)
	require.Equal(t, agentpay.WebhookSecretRolledWarning, d.RollWebhookSecret.Warning)
	stored, err := api.Svc.MerchantByID(context.Background(), m.ID)
	require.NoError(t, err)
	require.Equal(t, m.Merchant.WebhookSecretEncrypted, stored.WebhookSecretEncrypted, "the live secret is untouched")
	require.NotEqual(t, m.Merchant.TestWebhookSecretEncrypted, stored.TestWebhookSecretEncrypted)

	api.do(t, m.Keys.LiveSecretKey, roll, map[string]any{"s": 0}).decode(t, &d)
	require.True(t, d.RollWebhookSecret.Livemode)
	require.Nil(t, d.RollWebhookSecret.PreviousSecretExpiresAt)

	out := api.do(t, m.Keys.LiveSecretKey, roll, map[string]any{"s": 604801})
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
	require.Equal(t, "overlap_seconds: must be from 0 to 604800 (7 days)", out.Errors[0].Message)
	require.Equal(t, "UNAUTHENTICATED", api.do(t, "", roll, nil).code(t))
}

type paymentsPage struct {
	Payments struct {
		TotalCount int
		PageInfo   pageInfo
		Edges      []struct {
			Node struct {
				ID, ExternalID, Status, Chain, TxHash string
				AmountUsd, TokenAmount                json.Number
				AmountToken                           int64
				Session                               struct{ ExternalID string }
			}
		}
	}
}

func (p paymentsPage) externalIDs() []string {
	out := make([]string, len(p.Payments.Edges))
	for i, e := range p.Payments.Edges {
		out[i] = e.Node.ExternalID
	}
	return out
}

const paymentsQuery = `query($first: Int, $after: Cursor, $last: Int, $before: Cursor, $where: PaymentFilter) {
	payments(first: $first, after: $after, last: $last, before: $before, where: $where) {
		totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
		edges { node { id externalId status chain txHash amountUsd tokenAmount amountToken session { externalId } } } } }`

func TestMerchantPayments(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Payments Shop", agentpay.MerchantInput{})
	other := api.register(t, "Other Shop", agentpay.MerchantInput{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ids := api.createSessions(t, m.Keys.TestSecretKey, 2, base)
	live := api.createSessions(t, m.Keys.LiveSecretKey, 1, base)
	theirs := api.createSessions(t, other.Keys.TestSecretKey, 1, base)

	// Five payments: three to the first session, two to the second, one
	// minute apart (oldest first), with exact odd amounts.
	statuses := []payment.Status{payment.StatusConfirmed, payment.StatusConfirming, payment.StatusDetected, payment.StatusConfirmed, payment.StatusFailed}
	var pays []*ent.Payment
	for i, st := range statuses {
		sess := ids[0]
		if i >= 3 {
			sess = ids[1]
		}
		pays = append(pays, api.recordPayment(t, sess, 1_234_567+int64(i), st, base.Add(time.Duration(i)*time.Minute)))
	}
	api.recordPayment(t, live[0], 1_000_000, payment.StatusConfirmed, base)
	api.recordPayment(t, theirs[0], 1_000_000, payment.StatusConfirmed, base)
	want := make([]string, len(pays)) // newest first
	for i, p := range pays {
		want[len(pays)-1-i] = p.ExternalID
	}

	// Forward walk, 2 per page.
	var got []string
	var after any
	for range 4 {
		var p paymentsPage
		api.do(t, m.Keys.TestSecretKey, paymentsQuery, map[string]any{"first": 2, "after": after}).decode(t, &p)
		require.Equal(t, 5, p.Payments.TotalCount)
		got = append(got, p.externalIDs()...)
		if !p.Payments.PageInfo.HasNextPage {
			break
		}
		after = *p.Payments.PageInfo.EndCursor
	}
	require.Equal(t, want, got)

	var p paymentsPage
	api.do(t, m.Keys.TestSecretKey, paymentsQuery, map[string]any{"last": 1}).decode(t, &p)
	n := p.Payments.Edges[0].Node
	require.Equal(t, pays[0].ExternalID, n.ExternalID)
	require.Equal(t, "1.234567", n.TokenAmount.String())
	require.Equal(t, "1.234567", n.AmountUsd.String())
	require.EqualValues(t, 1_234_567, n.AmountToken)
	require.Equal(t, ids[0], n.Session.ExternalID)
	require.True(t, p.Payments.PageInfo.HasPreviousPage)

	tests := []struct {
		name  string
		where map[string]any
		want  []string
	}{
		{"one session", map[string]any{"sessionExternalId": ids[1]}, []string{pays[4].ExternalID, pays[3].ExternalID}},
		{"confirmed", map[string]any{"status": []string{"CONFIRMED"}}, []string{pays[3].ExternalID, pays[0].ExternalID}},
		{"session and status", map[string]any{"sessionExternalId": ids[0], "status": []string{"CONFIRMING", "DETECTED"}}, []string{pays[2].ExternalID, pays[1].ExternalID}},
		{"another merchant's session", map[string]any{"sessionExternalId": theirs[0]}, []string{}},
		{"the other mode's session", map[string]any{"sessionExternalId": live[0]}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p paymentsPage
			api.do(t, m.Keys.TestSecretKey, paymentsQuery, map[string]any{"where": tc.where}).decode(t, &p)
			require.Equal(t, tc.want, p.externalIDs())
			require.Equal(t, len(tc.want), p.Payments.TotalCount)
		})
	}

	// A session's own payments, through the session.
	var s struct {
		Session struct {
			Payments struct {
				TotalCount int
				Edges      []struct{ Node struct{ ExternalID string } }
			}
		}
	}
	api.do(t, m.Keys.TestSecretKey, `query($id: String!) { session(externalId: $id) {
		payments(first: 10, orderBy: {field: CREATED_AT, direction: ASC}) { totalCount edges { node { externalId } } } } }`,
		map[string]any{"id": ids[0]}).decode(t, &s)
	require.Equal(t, 3, s.Session.Payments.TotalCount)
	for i, e := range s.Session.Payments.Edges {
		require.Equal(t, pays[i].ExternalID, e.Node.ExternalID)
	}

	var livePays paymentsPage
	api.do(t, m.Keys.LiveSecretKey, paymentsQuery, nil).decode(t, &livePays)
	require.Equal(t, 1, livePays.Payments.TotalCount)
	require.Equal(t, live[0], livePays.Payments.Edges[0].Node.Session.ExternalID)
}

type webhookEventNode struct {
	ID, EventType, Payload string
	Livemode               bool
	SessionExternalID      *string
	Deliveries             []struct {
		ID, URL, Status string
		Attempts        int
		AttemptLog      []struct {
			StatusCode *int
			Error      *string
		}
	}
}

const webhookEventFields = `id eventType livemode sessionExternalId payload
	deliveries { id url status attempts attemptLog { statusCode error } }`

type webhookEventsPage struct {
	WebhookEvents struct {
		TotalCount int
		PageInfo   pageInfo
		Edges      []struct{ Node webhookEventNode }
	}
}

func (p webhookEventsPage) ids() []string {
	out := make([]string, len(p.WebhookEvents.Edges))
	for i, e := range p.WebhookEvents.Edges {
		out[i] = e.Node.ID
	}
	return out
}

const webhookEventsQuery = `query($first: Int, $after: Cursor, $last: Int, $before: Cursor, $where: WebhookEventFilter) {
	webhookEvents(first: $first, after: $after, last: $last, before: $before, where: $where) {
		totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
		edges { node { ` + webhookEventFields + ` } } } }`

func TestMerchantWebhookEvents(t *testing.T) {
	// The receiver answers its first request 500, hangs up on the second
	// without an answer, and answers 200 from then on (counted).
	var answers atomic.Int32
	var seen atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch seen.Add(1) {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
			return
		case 2:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		answers.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(receiver.Close)

	api := newMerchantAPI(t)
	hook := receiver.URL + "/hook"
	m := api.register(t, "Hook Shop", agentpay.MerchantInput{WebhookURL: &hook})
	noHook := api.register(t, "Quiet Shop", agentpay.MerchantInput{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ids := api.createSessions(t, m.Keys.TestSecretKey, 2, base)
	live := api.createSessions(t, m.Keys.LiveSecretKey, 1, base)
	quiet := api.createSessions(t, noHook.Keys.TestSecretKey, 1, base)
	ctx := context.Background()

	// Events, oldest first: detected and confirmed for the first session,
	// expired for the second; one live event.
	kinds := []string{agentpay.EventPaymentDetected, agentpay.EventPaymentConfirmed, agentpay.EventSessionExpired}
	var events []*ent.WebhookEvent
	for i, kind := range kinds {
		sess := ids[0]
		if i == 2 {
			sess = ids[1]
		}
		ev := api.recordEvent(t, m.ID, false, kind, sess)
		api.setCreatedAt(t, "webhook_events", ev.ID, base.Add(time.Duration(i)*time.Minute))
		events = append(events, ev)
	}
	api.recordEvent(t, m.ID, true, agentpay.EventSessionExpired, live[0])
	quietEvent := api.recordEvent(t, noHook.ID, false, agentpay.EventSessionExpired, quiet[0])

	// The first event's delivery: a 500, no answer, then a 200.
	var ev0 *ent.WebhookEvent
	var err error
	ev0, err = api.Svc.WebhookEvent(ctx, api.auth(t, m.Keys.TestSecretKey), events[0].ID)
	require.NoError(t, err)
	require.Len(t, ev0.Edges.Deliveries, 1)
	for range 3 {
		_, err := api.Svc.DeliverWebhook(ctx, ev0.Edges.Deliveries[0].ID)
		require.NoError(t, err)
	}

	key := m.Keys.TestSecretKey
	var p webhookEventsPage
	api.do(t, key, webhookEventsQuery, nil).decode(t, &p)
	require.Equal(t, 3, p.WebhookEvents.TotalCount)
	require.Equal(t, []string{events[2].ID.String(), events[1].ID.String(), events[0].ID.String()}, p.ids())
	e := p.WebhookEvents.Edges[2].Node
	require.Equal(t, agentpay.EventPaymentDetected, e.EventType)
	require.False(t, e.Livemode)
	require.Equal(t, ids[0], *e.SessionExternalID)
	require.Equal(t, string(events[0].Payload), e.Payload, "the body exactly as sent")
	require.Len(t, e.Deliveries, 1)
	d := e.Deliveries[0]
	require.Equal(t, hook, d.URL)
	require.Equal(t, "SUCCEEDED", d.Status)
	require.Equal(t, 3, d.Attempts)
	require.Len(t, d.AttemptLog, 3)
	log := d.AttemptLog
	require.Equal(t, 500, *log[0].StatusCode, "attempts in the order they were made")
	require.Contains(t, *log[0].Error, "500")
	require.Nil(t, log[1].StatusCode, "no answer: no status")
	require.NotEmpty(t, *log[1].Error)
	require.Equal(t, 200, *log[2].StatusCode)
	require.Nil(t, log[2].Error, "a success has no error")

	// Backward paging and filters.
	api.do(t, key, webhookEventsQuery, map[string]any{"last": 2}).decode(t, &p)
	require.Equal(t, []string{events[1].ID.String(), events[0].ID.String()}, p.ids())
	require.True(t, p.WebhookEvents.PageInfo.HasPreviousPage)
	api.do(t, key, webhookEventsQuery, map[string]any{"last": 2, "before": *p.WebhookEvents.PageInfo.StartCursor}).decode(t, &p)
	require.Equal(t, []string{events[2].ID.String()}, p.ids())
	require.False(t, p.WebhookEvents.PageInfo.HasPreviousPage)
	for name, tc := range map[string]struct {
		where map[string]any
		want  []*ent.WebhookEvent
	}{
		"kind":               {map[string]any{"eventType": []string{agentpay.EventSessionExpired}}, []*ent.WebhookEvent{events[2]}},
		"kinds":              {map[string]any{"eventType": []string{agentpay.EventPaymentDetected, agentpay.EventPaymentConfirmed}}, []*ent.WebhookEvent{events[1], events[0]}},
		"session":            {map[string]any{"sessionExternalId": ids[0]}, []*ent.WebhookEvent{events[1], events[0]}},
		"another's session":  {map[string]any{"sessionExternalId": quiet[0]}, nil},
		"kind and session":   {map[string]any{"sessionExternalId": ids[0], "eventType": []string{agentpay.EventPaymentConfirmed}}, []*ent.WebhookEvent{events[1]}},
		"no match for kinds": {map[string]any{"eventType": []string{agentpay.EventSettlementCompleted}}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var p webhookEventsPage
			api.do(t, key, webhookEventsQuery, map[string]any{"where": tc.where}).decode(t, &p)
			want := []string{}
			for _, ev := range tc.want {
				want = append(want, ev.ID.String())
			}
			require.Equal(t, want, p.ids())
			require.Equal(t, len(want), p.WebhookEvents.TotalCount)
		})
	}
	out := api.do(t, key, webhookEventsQuery, map[string]any{"where": map[string]any{"eventType": []string{"payment.paid"}}})
	require.Equal(t, "BAD_USER_INPUT", out.code(t))

	// Redeliver: a new series to the current URL, in the list after the
	// first; then its try succeeds.
	const redeliver = `mutation($id: ID!) { redeliverWebhook(eventId: $id) { id url status attempts } }`
	var r struct {
		RedeliverWebhook struct {
			ID, URL, Status string
			Attempts        int
		}
	}
	api.do(t, key, redeliver, map[string]any{"id": events[0].ID}).decode(t, &r)
	require.Equal(t, "PENDING", r.RedeliverWebhook.Status)
	require.Equal(t, hook, r.RedeliverWebhook.URL)
	require.Zero(t, r.RedeliverWebhook.Attempts)
	_, err = api.Svc.DeliverWebhook(ctx, uuid.MustParse(r.RedeliverWebhook.ID))
	require.NoError(t, err)
	var one struct{ WebhookEvent webhookEventNode }
	api.do(t, key, `query($id: ID!) { webhookEvent(id: $id) { `+webhookEventFields+` } }`,
		map[string]any{"id": events[0].ID}).decode(t, &one)
	require.Len(t, one.WebhookEvent.Deliveries, 2)
	require.Equal(t, ev0.Edges.Deliveries[0].ID.String(), one.WebhookEvent.Deliveries[0].ID, "oldest series first")
	require.Equal(t, r.RedeliverWebhook.ID, one.WebhookEvent.Deliveries[1].ID)
	require.Equal(t, "SUCCEEDED", one.WebhookEvent.Deliveries[1].Status)
	require.Equal(t, []struct {
		StatusCode *int
		Error      *string
	}{{ptr(200), nil}}, one.WebhookEvent.Deliveries[1].AttemptLog)
	require.EqualValues(t, 2, answers.Load())

	// Redeliver refusals: unknown, another merchant's or the other mode's
	// event, and a merchant without a webhook URL.
	for name, id := range map[string]string{"unknown": uuid.NewString(), "another merchant's": quietEvent.ID.String()} {
		require.Equal(t, "NOT_FOUND", api.do(t, key, redeliver, map[string]any{"id": id}).code(t), name)
	}
	require.Equal(t, "NOT_FOUND", api.do(t, m.Keys.LiveSecretKey, redeliver, map[string]any{"id": events[0].ID}).code(t))
	out = api.do(t, noHook.Keys.TestSecretKey, redeliver, map[string]any{"id": quietEvent.ID})
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
	require.Contains(t, out.Errors[0].Message, "webhook_url")
}

// TestMerchantWebhookURLPublicOnly: unless the operator allows private
// addresses (WEBHOOK_ALLOW_PRIVATE), a test key cannot point test mode's
// webhook at localhost or a private address either, nor can a
// registration; a public one is fine.
func TestMerchantWebhookURLPublicOnly(t *testing.T) {
	api := newMerchantAPIIn(t, testenv.Options{Jobs: true, PublicWebhooksOnly: true})
	m := api.register(t, "Public Shop", agentpay.MerchantInput{})
	const update = `mutation($url: String!) { updateMerchant(input: {webhookUrl: $url}) { webhookUrl } }`
	for url, msg := range map[string]string{
		"http://127.0.0.1:9/hook":          "webhook_url: must not point at a private, loopback or link-local address: webhooks go to public addresses only",
		"http://169.254.169.254/latest":    "webhook_url: must not point at a private, loopback or link-local address: webhooks go to public addresses only",
		"http://localhost:8080/hook":       "webhook_url: must not point at localhost: webhooks go to public addresses only",
		"http://[fd00::1]/hook":            "webhook_url: must not point at a private, loopback or link-local address: webhooks go to public addresses only",
		"https://shop.example.com/webhook": "",
	} {
		for _, key := range []string{m.Keys.TestSecretKey, m.Keys.LiveSecretKey} {
			out := api.do(t, key, update, map[string]any{"url": url})
			if msg == "" {
				require.Empty(t, out.Errors, url)
				continue
			}
			require.Equal(t, "BAD_USER_INPUT", out.code(t), url)
			require.Equal(t, msg, out.Errors[0].Message, url)
		}
	}
	stored, err := api.Svc.MerchantByID(context.Background(), m.ID)
	require.NoError(t, err)
	require.Equal(t, "https://shop.example.com/webhook", stored.WebhookURL)
	require.Equal(t, "https://shop.example.com/webhook", stored.TestWebhookURL)
	_, err = api.Svc.RegisterMerchant(context.Background(), agentpay.MerchantInput{
		Name: ptr("Local"), Email: ptr("local@example.com"), WebhookURL: ptr("http://localhost:9000/hook")})
	require.True(t, agentpay.IsValidation(err), "registration too: %v", err)
}

// TestMerchantRedeliverRateLimited: past its hourly redeliveries an event
// is refused RATE_LIMITED with the wait in the extensions, and no delivery
// is created.
func TestMerchantRedeliverRateLimited(t *testing.T) {
	api := newMerchantAPI(t)
	hook := "https://shop.example.com/hook"
	m := api.register(t, "Busy Shop", agentpay.MerchantInput{WebhookURL: &hook})
	sess := api.createSessions(t, m.Keys.TestSecretKey, 1, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ev := api.recordEvent(t, m.ID, false, agentpay.EventSessionExpired, sess[0])
	const redeliver = `mutation($id: ID!) { redeliverWebhook(eventId: $id) { id } }`
	for range agentpay.RedeliveriesPerEvent {
		out := api.do(t, m.Keys.TestSecretKey, redeliver, map[string]any{"id": ev.ID})
		require.Empty(t, out.Errors)
	}
	out := api.do(t, m.Keys.TestSecretKey, redeliver, map[string]any{"id": ev.ID})
	require.Equal(t, "RATE_LIMITED", out.code(t))
	require.Contains(t, out.Errors[0].Message, "10 redeliveries per hour of one event")
	require.Equal(t, "hour", out.Errors[0].Extensions["window"])
	retry, err := out.Errors[0].Extensions["retryAfter"].(json.Number).Int64()
	require.NoError(t, err)
	require.Positive(t, retry)
	require.LessOrEqual(t, retry, int64(3600))
	n, err := api.DB.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(ev.ID)).Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1+agentpay.RedeliveriesPerEvent, n)
}

// TestMerchantWebhookRefusedTargetLog: a test-mode webhook URL naming a
// loopback receiver (set while the operator allowed private addresses) is
// refused at every try once they are not, the first delivery and a
// redelivery alike; the attempt log shows the one generic error, no status
// and no duration, nothing of the address.
func TestMerchantWebhookRefusedTargetLog(t *testing.T) {
	ctx := context.Background()
	api := newMerchantAPIIn(t, testenv.Options{Jobs: true, PublicWebhooksOnly: true})
	receiver := testenv.NewReceiver(t, http.StatusOK)
	hook := "https://shop.example.com/hook"
	m := api.register(t, "Probe", agentpay.MerchantInput{WebhookURL: &hook})
	local := strings.Replace(receiver.URL, "127.0.0.1", "localhost", 1) + "/admin"
	require.NoError(t, api.DB.Ent.Merchant.UpdateOneID(m.ID).SetTestWebhookURL(local).Exec(ctx))
	sess := api.createSessions(t, m.Keys.TestSecretKey, 1, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ev := api.recordEvent(t, m.ID, false, agentpay.EventSessionExpired, sess[0])

	out := api.do(t, m.Keys.TestSecretKey, `mutation($id: ID!) { redeliverWebhook(eventId: $id) { id } }`, map[string]any{"id": ev.ID})
	require.Empty(t, out.Errors)
	deliveries, err := api.Svc.WebhookDeliveries(ctx, ev.ID)
	require.NoError(t, err)
	require.Len(t, deliveries, 2)
	for _, d := range deliveries {
		_, err := api.Svc.DeliverWebhook(ctx, d.ID)
		require.NoError(t, err)
	}
	require.Empty(t, receiver.Requests())

	out = api.do(t, m.Keys.TestSecretKey, `query($id: ID!) { webhookEvent(id: $id) {
		deliveries { url attemptLog { statusCode durationMs error } } } }`, map[string]any{"id": ev.ID})
	require.Empty(t, out.Errors)
	var d struct {
		WebhookEvent struct {
			Deliveries []struct {
				URL        string
				AttemptLog []struct {
					StatusCode *int
					DurationMs int
					Error      *string
				}
			}
		}
	}
	out.decode(t, &d)
	require.Len(t, d.WebhookEvent.Deliveries, 2)
	for _, dl := range d.WebhookEvent.Deliveries {
		require.Len(t, dl.AttemptLog, 1)
		a := dl.AttemptLog[0]
		require.Nil(t, a.StatusCode)
		require.Zero(t, a.DurationMs)
		require.Equal(t, "refused: the webhook URL's host does not resolve to a public address", *a.Error)
	}
	require.NotContains(t, string(out.Data), "127.0.0.1", "the address dialled is not shown")
}
