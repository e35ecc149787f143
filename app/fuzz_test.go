package app

// Fuzz target of the app's forms. Seeds are in testdata/fuzz/<target>;
// `make fuzz` runs it (docs/testing.md).

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/ent/mailmessage"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

// fuzzFormToken is the pre-session form token the fuzzed browser holds
// (its cookie), which {form_token} in a body stands for.
const fuzzFormToken = "fuzz-form-token-0123456789abcdef"

// FuzzAppForms posts fuzzed bodies (with a fuzzed Content-Type and path
// token) to every form the app takes, read from its own router (chi.Walk:
// a form added later is fuzzed too), through the real handler and service
// on a real database, as a visitor without cookies, a visitor holding the
// form cookie, or a signed-in person. In the input, {form_token} and
// {csrf} stand for the browser's form token and the session's CSRF token
// and {signin} for a live sign-in link's token, so the fuzzer gets past
// the CSRF checks to the service's rules. Every answer is below 500 (or
// 503), carries the app's security headers, is valid JSON when it says
// JSON, and never echoes markup from the request: "<x-fuzz" in a field
// never comes back unescaped.
func FuzzAppForms(f *testing.F) {
	env := testenv.New(f, testenv.Options{Jobs: true})
	var cfg agentpay.Config
	env.Fill(&cfg)
	cfg.AppURL = "http://app.test/app"
	svc, err := agentpay.NewService(cfg)
	if err != nil {
		f.Fatal(err)
	}
	h := NewHandler(Config{Service: svc, Prefix: "/app", GraphQLPath: "/graphql"})
	var forms []string
	if err := chi.Walk(h.(chi.Routes), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method == http.MethodPost {
			forms = append(forms, pattern)
		}
		return nil
	}); err != nil || len(forms) == 0 {
		f.Fatalf("the app's forms: %v %v", forms, err)
	}
	ctx := context.Background()
	// mailedToken asks for a sign-in link to email and answers its token.
	mailedToken := func(tb testing.TB, email string) string {
		if err := svc.RequestSignIn(ctx, email, "192.0.2.1"); err != nil {
			tb.Fatal(err)
		}
		m, err := env.DB.Ent.MailMessage.Query().Where(mailmessage.To(email)).Order(mailmessage.ByID()).All(ctx)
		if err != nil || len(m) == 0 {
			tb.Fatalf("no sign-in mail: %v", err)
		}
		links := agentpay.MailLinks(m[len(m)-1].Text)
		return links[0][strings.LastIndex(links[0], "/")+1:]
	}
	if _, err := svc.CreateUser(ctx, agentpay.NewUser{Email: "fuzz@example.com", Username: "fuzz_app"}); err != nil {
		f.Fatal(err)
	}
	// session is the signed-in person's cookie and CSRF token, signed in
	// again whenever a fuzzed request signed it out.
	var session, csrf string
	signIn := func(tb testing.TB) {
		in, err := svc.CompleteSignIn(ctx, mailedToken(tb, "fuzz@example.com"), nil, "fuzz")
		if err != nil {
			tb.Fatal(err)
		}
		v, err := svc.AuthenticateBrowser(ctx, in.SessionToken)
		if err != nil {
			tb.Fatal(err)
		}
		session, csrf = in.SessionToken, v.CSRFToken()
	}
	signIn(f)
	link := mailedToken(f, "new-person@example.com")

	f.Fuzz(func(t *testing.T, form uint8, token, contentType string, body []byte, who uint8) {
		if _, err := svc.AuthenticateBrowser(ctx, session); err != nil {
			signIn(t)
		}
		if _, err := svc.CheckSignInLink(ctx, link); err != nil {
			link = mailedToken(t, "new-person@example.com")
		}
		fill := strings.NewReplacer("{form_token}", fuzzFormToken, "{csrf}", csrf, "{signin}", link)
		pattern := forms[int(form)%len(forms)]
		path := strings.ReplaceAll(pattern, "{token}", url.PathEscape(fill.Replace(token)))
		req := httptest.NewRequest(http.MethodPost, "http://app.test"+path, strings.NewReader(fill.Replace(string(body))))
		req.RemoteAddr = "192.0.2.1:4321"
		if validHeader(contentType) {
			req.Header.Set("Content-Type", contentType)
		}
		if who%3 > 0 {
			req.AddCookie(&http.Cookie{Name: formCookie, Value: fuzzFormToken})
		}
		if who%3 == 2 {
			req.AddCookie(&http.Cookie{Name: httpx.SessionCookie, Value: session})
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("POST %s: %d %s", pattern, rec.Code, rec.Body)
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != contentSecurityPolicy {
			t.Fatalf("POST %s: Content-Security-Policy %q", pattern, got)
		}
		ct := rec.Header().Get("Content-Type")
		if strings.HasPrefix(ct, "application/json") && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST %s: not JSON: %s", pattern, rec.Body)
		}
		if strings.Contains(strings.ToLower(rec.Body.String()), "<x-fuzz") {
			t.Fatalf("POST %s: the answer echoes markup unescaped: %s", pattern, rec.Body)
		}
	})
}

// validHeader: net/http refuses to send other values, so the server never
// sees them.
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
