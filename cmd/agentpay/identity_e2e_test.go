package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestInvitationTakeoverEndToEnd plays issue 23's merchant takeover from
// outside, against `agentpay dev`, through the public REST and GraphQL
// APIs and the app's pages: a merchant's contact address is confirmed;
// agents invite that address (REST and GraphQL) and use everything they are
// answered. No account gets the address, an account of the attacker's
// own cannot accept the invitation, and nobody but the address's holder,
// from the e-mailed link, owns the merchant.
func TestInvitationTakeoverEndToEnd(t *testing.T) {
	base := startAppDev(t, nil)
	const contact = "owner@shop.test"
	var reg map[string]any
	require.Equal(t, http.StatusCreated, postJSON(t, base+"/checkout/merchants/register",
		`{"name": "Target Shop", "email": "`+contact+`"}`, &reg))
	owner := newFormBrowser(t, base)
	owner.submit(t, caughtLinkTo(t, base, contact, "/app/confirm-email/"), nil, http.StatusOK)

	// The agents invite the contact address, over REST and GraphQL.
	mallory := registerTestAgent(t, base, "mallory_agent")
	var restAnswer bytes.Buffer
	restReq, err := http.NewRequest(http.MethodPost, base+"/agents/me/invite-human", strings.NewReader(`{"email": "`+contact+`"}`))
	require.NoError(t, err)
	restReq.Header.Set("Content-Type", "application/json")
	restReq.Header.Set("X-Agent-Key", mallory.key)
	resp, err := http.DefaultClient.Do(restReq)
	require.NoError(t, err)
	_, err = io.Copy(&restAnswer, resp.Body)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, restAnswer.String())
	var invite struct {
		InviteURL string `json:"invite_url"`
	}
	require.NoError(t, json.Unmarshal(restAnswer.Bytes(), &invite))
	accomplice := registerTestAgent(t, base, "accomplice_agent")
	gqlAnswer := postGraphQL(t, base, http.Header{"X-Agent-Key": {accomplice.key}},
		`mutation($e: String!) { inviteHuman(email: $e) { inviteUrl } }`, map[string]any{"e": contact})
	var gql struct {
		Data struct{ InviteHuman struct{ InviteURL string } }
	}
	require.NoError(t, json.Unmarshal(gqlAnswer, &gql), string(gqlAnswer))
	require.NotEmpty(t, gql.Data.InviteHuman.InviteURL, string(gqlAnswer))

	// The tokens e-mailed to the address appear in no answer.
	var tokens []string
	require.Eventually(t, func() bool {
		var inbox struct{ Messages []struct{ Links []string } }
		getJSON(t, base+"/dev/mail?to="+url.QueryEscape(contact), &inbox)
		tokens = nil
		for _, m := range inbox.Messages {
			for _, l := range m.Links {
				if token := regexp.MustCompile(`inv_[0-9A-Za-z]{43}`).FindString(l); token != "" {
					tokens = append(tokens, token)
				}
			}
		}
		return len(tokens) == 2
	}, processTestTimeout, 100*time.Millisecond, "each invitation e-mails its own link")
	for _, token := range tokens {
		require.NotContains(t, restAnswer.String(), token)
		require.NotContains(t, string(gqlAnswer), token)
	}

	// What they got signs nobody up.
	attacker := newFormBrowser(t, base)
	for _, got := range []string{invite.InviteURL, gql.Data.InviteHuman.InviteURL} {
		require.True(t, strings.HasPrefix(got, base+"/app/invite/"), got)
		page := attacker.get(t, got, http.StatusOK)
		require.Contains(t, page, `id="reference"`)
		require.NotContains(t, page, `id="signup"`)
		body := attacker.submit(t, got, url.Values{"username": {"mallory"}}, http.StatusConflict)
		require.Contains(t, body, "open the link in the invitation e-mail")
	}

	// An account of the attacker's own cannot accept the invitation through
	// it, and owns nothing.
	attacker.signIn(t, "mallory@evil.test", "mallory")
	accept := attacker.graphQL(t, `mutation($t: String!) { acceptInvitation(token: $t) { status } }`,
		map[string]any{"t": invite.InviteURL[strings.LastIndex(invite.InviteURL, "/")+1:]})
	require.Contains(t, string(accept), `"FORBIDDEN"`, string(accept))
	require.JSONEq(t, `{"data": {"viewer": {"merchants": []}}}`,
		string(attacker.graphQL(t, `{ viewer { merchants { id role } } }`, nil)))

	// The address's holder signs up from the e-mailed link and owns it.
	owner.submit(t, caughtLinkTo(t, base, contact, "/app/invite/inv_"), url.Values{"username": {"shop_owner"}}, http.StatusOK)
	var mine struct {
		Data struct {
			Viewer struct{ Merchants []struct{ ID, Role string } }
		}
	}
	require.NoError(t, json.Unmarshal(owner.graphQL(t, `{ viewer { merchants { id role } } }`, nil), &mine))
	require.Len(t, mine.Data.Viewer.Merchants, 1)
	require.Equal(t, reg["merchant"].(map[string]any)["id"], mine.Data.Viewer.Merchants[0].ID)
	require.Equal(t, "OWNER", mine.Data.Viewer.Merchants[0].Role)
}

// formBrowser is a person's browser on the app without JavaScript: a
// cookie jar, the pre-session form token, and the session's CSRF token
// once signed in.
type formBrowser struct {
	base   string
	client *http.Client
	csrf   string
}

func newFormBrowser(t *testing.T, base string) *formBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &formBrowser{base: base, client: &http.Client{Jar: jar}}
}

var formTokenField = regexp.MustCompile(`name="form_token" value="([^"]+)"`)

// get answers a page's body, checking its status.
func (b *formBrowser) get(t *testing.T, u string, status int) string {
	t.Helper()
	resp, err := b.client.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, string(body))
	return string(body)
}

// submit posts a page's form (the page read first, as a browser does)
// with the form token and fields, following redirects.
func (b *formBrowser) submit(t *testing.T, u string, fields url.Values, status int) string {
	t.Helper()
	m := formTokenField.FindStringSubmatch(b.get(t, b.base+"/app/signin", http.StatusOK))
	require.NotNil(t, m)
	b.get(t, u, http.StatusOK)
	form := url.Values{"form_token": {m[1]}}
	for k, v := range fields {
		form[k] = v
	}
	resp, err := b.client.PostForm(u, form)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, string(body))
	if m := regexp.MustCompile(`data-csrf="([^"]+)"`).FindStringSubmatch(string(body)); m != nil {
		b.csrf = m[1]
	}
	return string(body)
}

// signIn signs in (a new account: username) with a link the app mails.
func (b *formBrowser) signIn(t *testing.T, email, username string) {
	t.Helper()
	b.submit(t, b.base+"/app/signin", url.Values{"email": {email}}, http.StatusOK)
	b.submit(t, caughtLinkTo(t, b.base, email, "/app/signin/"), url.Values{"username": {username}}, http.StatusOK)
	require.NotEmpty(t, b.csrf, "signed in: home carries the session's CSRF token")
}

// graphQL posts an operation with the session cookie and CSRF token.
func (b *formBrowser) graphQL(t *testing.T, q string, vars map[string]any) []byte {
	t.Helper()
	return postGraphQLWith(t, b.client, b.base, http.Header{"X-CSRF-Token": {b.csrf}}, q, vars)
}

func postGraphQL(t *testing.T, base string, h http.Header, q string, vars map[string]any) []byte {
	t.Helper()
	return postGraphQLWith(t, http.DefaultClient, base, h, q, vars)
}

func postGraphQLWith(t *testing.T, c *http.Client, base string, h http.Header, q string, vars map[string]any) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	return out
}
