package app

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/cardissuer/sandbox"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/ent/user"
	"agentpay/graph"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

var hrefPattern = regexp.MustCompile(`href="([^"]*)"`)

// TestEveryMailLinkOpensAPage: each kind of e-mail the service sends
// (sign-in link, agent invitation, pairing request, pairing consent, card
// request, step-up confirmation, merchant contact confirmation, merchant
// member invitation), made by the service's own flows, carries the same
// links in its text and HTML parts, and each link, followed as its
// recipient would (signed in when the recipient has an account), opens a
// page of the app with status 200, and the section a link's fragment
// names is on it. The pairing request once linked to /app/pairings, a
// page that never existed (issue 27 item 1).
func TestEveryMailLinkOpensAPage(t *testing.T) {
	env := testenv.New(t, testenv.Options{Jobs: true, Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg := agentpay.Config{AgentMode: agentpay.ModeTest, CardIssuer: sandbox.New()}
	env.Fill(&cfg)
	cfg.AppURL = srv.URL + "/app"
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	mux.Handle("/app/", NewHandler(Config{Service: svc, Prefix: "/app", URL: cfg.AppURL, GraphQLPath: "/graphql"}))
	mux.Handle("/graphql", graph.NewHandler(graph.HandlerConfig{Service: svc}))
	ctx := context.Background()

	checked := map[string]bool{} // mail ids followed
	kinds := map[string]int{}    // kind -> links followed
	anonymous := func() *http.Client { jar, _ := cookiejar.New(nil); return &http.Client{Jar: jar} }
	newest := func(to string) *ent.MailMessage {
		ms, err := env.DB.Ent.MailMessage.Query().Where(mailmessage.To(to)).Order(mailmessage.ByCreatedAt()).All(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, ms, "a mail to %s", to)
		return ms[len(ms)-1]
	}
	// follow opens every link of the newest mail to `to` with client c.
	follow := func(kind, to string, c *http.Client) []string {
		t.Helper()
		m := newest(to)
		require.False(t, checked[m.ID.String()], "%s: a new mail to %s", kind, to)
		checked[m.ID.String()] = true
		links := agentpay.MailLinks(m.Text)
		require.NotEmpty(t, links, "%s: the mail has a link", kind)
		var inHTML []string
		for _, h := range hrefPattern.FindAllStringSubmatch(m.HTML, -1) {
			inHTML = append(inHTML, html.UnescapeString(h[1]))
		}
		a, b := append([]string(nil), links...), append([]string(nil), inHTML...)
		sort.Strings(a)
		sort.Strings(b)
		require.Equal(t, a, b, "%s: the text and HTML parts carry the same links", kind)
		for _, l := range links {
			require.True(t, strings.HasPrefix(l, cfg.AppURL+"/"), "%s: %s is a page of the app", kind, l)
			resp, err := c.Get(l)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s opens a page (ended at %s)", kind, l, resp.Request.URL)
			require.Contains(t, string(body), "<h1>agentpay</h1>", "%s: %s is an app page", kind, l)
			if u, _ := url.Parse(l); u.Fragment != "" {
				require.Equal(t, u.Path, resp.Request.URL.Path, "%s: %s is not sent elsewhere", kind, l)
				require.Contains(t, string(body), `id="`+u.Fragment+`"`, "%s: the page has the section %s links to", kind, l)
			}
			kinds[kind]++
		}
		return links
	}
	// signIn spends the sign-in link mailed to u (followed first) and
	// answers a client with u's session cookie.
	signIn := func(u *ent.User) *http.Client {
		require.NoError(t, svc.RequestSignIn(ctx, u.Email, "192.0.2.1"))
		link := follow("sign-in", u.Email, anonymous())[0]
		in, err := svc.CompleteSignIn(ctx, link[strings.LastIndex(link, "/")+1:], nil, "test")
		require.NoError(t, err)
		c := anonymous()
		base, _ := url.Parse(srv.URL)
		c.Jar.SetCookies(base, []*http.Cookie{{Name: httpx.SessionCookie, Value: in.SessionToken, Path: "/"}})
		return c
	}

	reg, err := svc.QuickRegister(ctx, "mail_links_agent")
	require.NoError(t, err)
	bob, err := svc.CreateUser(ctx, agentpay.NewUser{Email: "bob@example.com", Username: "mail_bob"})
	require.NoError(t, err)
	asBob := signIn(bob)

	// A pairing request, approved; then a second human's, which waits
	// for bob's consent.
	p, err := svc.RequestPairing(ctx, reg.Agent, agentpay.PairingRequest{UserID: bob.ID.String(), Message: "hi"})
	require.NoError(t, err)
	follow("pairing request", bob.Email, asBob)
	_, err = svc.DecidePairing(ctx, bob, p.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	carol, err := svc.CreateUser(ctx, agentpay.NewUser{Email: "carol@example.com", Username: "mail_carol"})
	require.NoError(t, err)
	asCarol := signIn(carol)
	p, err = svc.RequestPairing(ctx, reg.Agent, agentpay.PairingRequest{UserID: carol.ID.String()})
	require.NoError(t, err)
	follow("pairing request", carol.Email, asCarol)
	_, err = svc.DecidePairing(ctx, carol, p.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	follow("pairing consent", bob.Email, asBob)

	// An agent's invitation to someone without an account.
	_, err = svc.InviteHuman(ctx, reg.Agent, "dave@example.com")
	require.NoError(t, err)
	follow("invitation", "dave@example.com", anonymous())

	// A card request to bob, verified, from the funded agent.
	_, err = env.DB.Ent.User.Update().Where(user.ID(bob.ID)).SetIdentityStatus(user.IdentityStatusVerified).Save(ctx)
	require.NoError(t, err)
	ws, err := svc.Wallets(ctx, reg.Agent)
	require.NoError(t, err)
	for _, w := range ws.All {
		if w.Chain == "base" && w.Kind == "custodial" {
			env.Fund(t, chains.Base, w.Address, 10_000_000)
		}
	}
	_, _, err = svc.RequestCardPurchase(ctx, reg.Agent, agentpay.CardPurchaseRequest{
		AmountUSD: decimal.RequireFromString("5"), MerchantName: "Mail Shop", Description: "a book", UserID: bob.ID.String()})
	require.NoError(t, err)
	follow("card request", bob.Email, asBob)

	// A step-up confirmed by e-mail (bob has no passkey).
	_, err = svc.BeginStepUp(ctx, &agentpay.Viewer{User: bob}, agentpay.StepUpRequest{Action: agentpay.StepUpWithdraw,
		Withdrawal: &agentpay.WithdrawRequest{ToAddress: "0x000000000000000000000000000000000000dEaD", AmountUSD: decimal.RequireFromString("1"), Chain: "base"}})
	require.NoError(t, err)
	follow("step-up", bob.Email, asBob)

	// A merchant's contact e-mail, confirmed; its owner invites a member.
	name, email := "Mail Links Shop", "owner@example.com"
	mreg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	link := follow("merchant contact e-mail", email, anonymous())[0]
	_, err = svc.ConfirmMerchantEmail(ctx, link[strings.LastIndex(link, "/")+1:])
	require.NoError(t, err)
	owner, err := svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "mail_owner", EmailVerified: true})
	require.NoError(t, err)
	_, err = svc.MerchantsOf(ctx, &agentpay.Viewer{User: owner}) // the owner's membership, made on first listing
	require.NoError(t, err)
	_, err = svc.InviteMember(ctx, &agentpay.Viewer{User: owner}, mreg.Merchant.ID, "member@example.com", agentpay.RoleReadOnly)
	require.NoError(t, err)
	follow("merchant member invitation", "member@example.com", anonymous())

	// A checkout payment of the agent's held by bob's spending policy:
	// bob is mailed what it pays for.
	threshold := decimal.RequireFromString("1")
	_, err = svc.SetSpendingPolicy(ctx, &agentpay.Viewer{User: bob}, reg.Agent.Username, agentpay.SpendingPolicyInput{ApprovalThreshold: &threshold})
	require.NoError(t, err)
	sess := env.DB.Ent.CheckoutSession.Create().SetMerchantID(mreg.Merchant.ID).SetExternalID("cs_test_" + strings.Repeat("m", 24)).
		SetLivemode(false).SetAmountUsd(decimal.RequireFromString("2")).SetCurrency("USD").SetDescription("Two mail coffees").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC()).SaveX(ctx)
	held, _, err := svc.PayCheckout(ctx, reg.Agent, agentpay.PayCheckoutRequest{ExternalID: sess.ExternalID, Chain: "base"})
	require.NoError(t, err)
	require.NotNil(t, held.Approval)
	approvalMail, err := env.DB.Ent.MailMessage.Query().Where(mailmessage.To(bob.Email)).Order(mailmessage.ByCreatedAt()).All(ctx)
	require.NoError(t, err)
	last := approvalMail[len(approvalMail)-1]
	require.Contains(t, last.Text, "asks you to approve: pay 2.00 USD to Mail Links Shop (merchant verified)")
	require.Contains(t, last.Text, "What for: Two mail coffees")
	require.Contains(t, last.Text, "Your spending policy held it: ")
	follow("spend approval", bob.Email, asBob)

	// Every mail made is one of those followed.
	all, err := env.DB.Ent.MailMessage.Query().All(ctx)
	require.NoError(t, err)
	for _, m := range all {
		require.True(t, checked[m.ID.String()], "the mail %q was followed", m.Subject)
	}
	require.Len(t, kinds, 9)
	t.Logf("links followed per kind: %v", kinds)
}
