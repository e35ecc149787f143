package graph

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// checkoutNode is one API process for the session status tests: a service
// and its GraphQL server.
type checkoutNode struct {
	Svc *agentpay.Service
	URL string
}

// checkoutEnv is the bundle every node shares: a Base devnet (a block every
// 50 ms, 2 confirmations), the vault (one MASTER_KEY) and test mode's
// networks.
type checkoutEnv struct {
	env *testenv.Env
}

func newCheckoutEnv(t *testing.T) *checkoutEnv {
	t.Helper()
	return &checkoutEnv{env: testenv.New(t, testenv.Options{
		NoDB: true, Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 2},
	})}
}

// node starts a service on db with its own GraphQL server, as one API
// process would.
func (e *checkoutEnv) node(t *testing.T, db *store.DB) *checkoutNode {
	t.Helper()
	srv := newTestServer(t, e.env, agentpay.Config{DB: db}, HandlerConfig{})
	return &checkoutNode{Svc: srv.Svc, URL: srv.URL}
}

// testSession registers a merchant and creates a test-mode session.
func testSession(t *testing.T, svc *agentpay.Service) (*agentpay.MerchantAuth, string) {
	t.Helper()
	ctx := context.Background()
	name, email := "Status Shop", "shop@example.com"
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	auth, err := svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	amount := decimal.RequireFromString("12.50")
	created, err := svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
	require.NoError(t, err)
	return auth, created.Session.ExternalID
}

type sessionStatusData struct {
	ExternalID            string      `json:"externalId"`
	Status                string      `json:"status"`
	AmountPaid            json.Number `json:"amountPaid"`
	Chain                 *string     `json:"chain"`
	Token                 *string     `json:"token"`
	Confirmations         int         `json:"confirmations"`
	RequiredConfirmations *int        `json:"requiredConfirmations"`
}

const sessionStatusSubscription = `subscription($id: String!) { sessionStatus(externalId: $id) {
	externalId status amountPaid chain token confirmations requiredConfirmations } }`

// subscribeStatus opens a graphql-transport-ws subscription to a session's
// status without a key (the hosted page has none).
func subscribeStatus(t *testing.T, url, externalID string) *wsClient {
	t.Helper()
	c := dialWS(t, url, nil)
	c.init(map[string]any{})
	c.send(map[string]any{"id": "s", "type": "subscribe", "payload": map[string]any{
		"query": sessionStatusSubscription, "variables": map[string]any{"id": externalID},
	}})
	return c
}

// nextStatus reads the subscription's next message.
func (c *wsClient) nextStatus() sessionStatusData {
	c.t.Helper()
	m, err := c.read()
	require.NoError(c.t, err)
	require.Equal(c.t, "s", m.ID)
	require.Equal(c.t, "next", m.Type, string(m.Payload))
	var out gqlResult
	require.NoError(c.t, json.Unmarshal(m.Payload, &out))
	var data struct{ SessionStatus sessionStatusData }
	out.decode(c.t, &data)
	return data.SessionStatus
}

// requireStatusFlow subscribes through sub, changes the session through
// change (select base, then cancel) and expects pending, detecting,
// cancelled on the subscription.
func requireStatusFlow(t *testing.T, sub, change *checkoutNode) {
	t.Helper()
	ctx := context.Background()
	auth, id := testSession(t, change.Svc)
	c := subscribeStatus(t, sub.URL, id)

	st := c.nextStatus()
	require.Equal(t, id, st.ExternalID)
	require.Equal(t, "PENDING", st.Status, "first the current status")
	require.Equal(t, "0", st.AmountPaid.String())
	require.Nil(t, st.Chain)
	require.Nil(t, st.Token)
	require.Zero(t, st.Confirmations)

	_, err := change.Svc.SelectPaymentMethod(ctx, id, "", "base", "USDC")
	require.NoError(t, err)
	st = c.nextStatus()
	require.Equal(t, "DETECTING", st.Status)
	require.Equal(t, "base", *st.Chain)
	require.Equal(t, "USDC", *st.Token)

	_, err = change.Svc.CancelSession(ctx, auth, id)
	require.NoError(t, err)
	st = c.nextStatus()
	require.Equal(t, "CANCELLED", st.Status)

	// A cancel that changes nothing publishes nothing; a refused select
	// (rolled back) neither.
	_, err = change.Svc.CancelSession(ctx, auth, id)
	require.NoError(t, err)
	_, err = change.Svc.SelectPaymentMethod(ctx, id, "", "base", "USDC")
	require.ErrorIs(t, err, agentpay.ErrConflict)
	require.NoError(t, c.conn.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	var m wsMessage
	for {
		if err := c.conn.ReadJSON(&m); err != nil {
			break // the deadline: nothing more was sent
		}
		require.Contains(t, []string{"ping", "pong"}, m.Type, "unexpected message %+v", m)
	}
}

// TestSessionStatusSubscription: one process; on SQLite the in-process
// status bus (on PostgreSQL, when TEST_DATABASE_URL is set, LISTEN/NOTIFY).
func TestSessionStatusSubscription(t *testing.T) {
	env := newCheckoutEnv(t)
	n := env.node(t, testdb.Open(t))
	requireStatusFlow(t, n, n)
}

func TestSessionStatusSubscriptionUnknownSession(t *testing.T) {
	env := newCheckoutEnv(t)
	n := env.node(t, testdb.Open(t))
	c := subscribeStatus(t, n.URL, "cs_test_doesnotexist")
	m, err := c.read()
	require.NoError(t, err)
	require.Equal(t, "s", m.ID)
	var errs []gqlError
	if m.Type == "error" {
		require.NoError(t, json.Unmarshal(m.Payload, &errs))
	} else {
		require.Equal(t, "next", m.Type, string(m.Payload))
		var out gqlResult
		require.NoError(t, json.Unmarshal(m.Payload, &out))
		errs = out.Errors
	}
	require.Len(t, errs, 1, string(m.Payload))
	require.Equal(t, "NOT_FOUND", errs[0].Extensions["code"])
}

// TestSessionStatusAcrossProcesses: two services on one PostgreSQL database,
// as two processes would be (API and worker, or two API instances). A
// subscriber on A sees every status change committed through B.
func TestSessionStatusAcrossProcesses(t *testing.T) {
	if !testdb.IsPostgres() {
		t.Skip("needs PostgreSQL: set TEST_DATABASE_URL")
	}
	env := newCheckoutEnv(t)
	dbA := testdb.Open(t)
	dbB := testdb.Reopen(t, dbA)
	a, b := env.node(t, dbA), env.node(t, dbB)
	requireStatusFlow(t, a, b)
}
