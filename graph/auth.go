package graph

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"agentpay"
	"agentpay/ent"
	"agentpay/graph/model"
	"agentpay/internal/httpx"
)

// credentials is what the transport learnt about the caller: the API key
// presented (maybe none) and the client IP. Nothing is checked here; the
// resolvers that need an agent authenticate once per operation (see
// operationAuth), so public queries cost no key lookup.
type credentials struct {
	apiKey string
	// merchantKey is the merchant secret key presented (maybe none).
	merchantKey string
	// dashboard is the merchant dashboard session presented (maybe none):
	// the other credential the merchant operations accept.
	dashboard string
	// adminKey is the admin key presented (maybe none).
	adminKey string
	// session and csrf are a signed-in human's browser session cookie and
	// the CSRF token sent with it (maybe none).
	session, csrf string
	ip            string
	// rate shows rate decisions as X-RateLimit-* headers on a plain HTTP
	// answer; nil on a websocket, whose operations have no headers.
	rate *rateHeaders
}

type credentialsKey struct{}

func withCredentials(ctx context.Context, c credentials) context.Context {
	return context.WithValue(ctx, credentialsKey{}, c)
}

func credentialsFrom(ctx context.Context) credentials {
	c, _ := ctx.Value(credentialsKey{}).(credentials)
	return c
}

// withRequestCredentials reads X-Agent-Key and the client IP of every HTTP
// request, the websocket upgrade included. The IP is httpx.ClientIP's, as
// on the REST facade: X-Forwarded-For counts only from a trusted proxy.
func withRequestCredentials(next http.Handler, proxies []netip.Prefix) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := credentials{
			apiKey:      strings.TrimSpace(r.Header.Get(httpx.AgentKeyHeader)),
			merchantKey: strings.TrimSpace(r.Header.Get(httpx.MerchantKeyHeader)),
			dashboard:   strings.TrimSpace(r.Header.Get(httpx.DashboardSessionHeader)),
			adminKey:    strings.TrimSpace(r.Header.Get(httpx.AdminKeyHeader)),
			csrf:        strings.TrimSpace(r.Header.Get(httpx.CSRFHeader)),
			ip:          httpx.ClientIP(r, proxies),
		}
		if cookie, err := r.Cookie(httpx.SessionCookie); err == nil {
			c.session = cookie.Value
		}
		if !websocket.IsWebSocketUpgrade(r) {
			c.rate = &rateHeaders{h: w.Header()}
		}
		next.ServeHTTP(w, r.WithContext(withCredentials(r.Context(), c)))
	})
}

// websocketInit reads the agent key (X-Agent-Key), the merchant secret
// key (X-Checkout-Secret-Key), the dashboard session (X-Dashboard-Session)
// and the admin key (X-Admin-Key) of a websocket connection from the
// connection_init payload, either at its top level ({"X-Agent-Key": "..."})
// or under "headers" ({"headers": {"X-Agent-Key": "..."}}), the two shapes
// GraphQL clients send; a key there replaces one on the upgrade request. A
// key that does not authenticate (or a deactivated merchant's) closes the
// connection at once (4403, as graphql-transport-ws clients expect), so a
// client learns of a bad key before subscribing; each operation still
// authenticates again, so a key regenerated or rolled while the connection
// is open stops working for it too, and a subscription already running
// ends within seconds (the service reads its credential again:
// livecredentials.go in the root). The connection's context counts its
// running operations (limitSocketOperations).
func websocketInit(svc *agentpay.Service) transport.WebsocketInitFunc {
	return func(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		c := credentialsFrom(ctx)
		agentKey, agentFound := initPayloadKey(payload, httpx.AgentKeyHeader)
		merchantKey, merchantFound := initPayloadKey(payload, httpx.MerchantKeyHeader)
		dashboard, dashboardFound := initPayloadKey(payload, httpx.DashboardSessionHeader)
		if agentFound {
			c.apiKey = agentKey
		}
		if merchantFound {
			c.merchantKey = merchantKey
		}
		if dashboardFound {
			c.dashboard = dashboard
		}
		// A socket signed in by its cookie proves it is the app's page (not
		// another site's, which the browser would send the cookie for too)
		// with the CSRF token in its connection_init.
		if csrf, ok := initPayloadKey(payload, httpx.CSRFHeader); ok {
			c.csrf = csrf
		}
		adminKey, adminFound := initPayloadKey(payload, httpx.AdminKeyHeader)
		if adminFound {
			c.adminKey = adminKey
		}
		ctx = withCredentials(ctx, c)
		var err error
		if agentFound && agentKey != "" {
			_, err = svc.Authenticate(ctx, agentKey)
		}
		if err == nil && merchantFound && merchantKey != "" {
			_, err = svc.AuthenticateMerchant(ctx, merchantKey)
		}
		if err == nil && dashboardFound && dashboard != "" {
			_, err = svc.AuthenticateDashboard(ctx, dashboard)
		}
		if err == nil && adminFound && adminKey != "" {
			err = svc.AuthenticateAdmin(adminKey)
		}
		if err != nil {
			ctx = transport.WithWebsocketCloseCode(ctx, 4403)
			ctx = transport.AppendCloseReason(ctx, "Forbidden")
			if !errors.Is(err, agentpay.ErrUnauthorized) && !errors.Is(err, agentpay.ErrForbidden) {
				return ctx, nil, errors.New("authentication failed")
			}
			return ctx, nil, err
		}
		return withSocketOperations(ctx), nil, nil
	}
}

func initPayloadKey(payload transport.InitPayload, header string) (string, bool) {
	if key, ok := lookupKey(payload, header); ok {
		return key, true
	}
	if headers, ok := payload["headers"].(map[string]any); ok {
		return lookupKey(headers, header)
	}
	return "", false
}

// lookupKey finds header (X-Agent-Key, X-Checkout-Secret-Key) in a JSON
// object, ignoring case as HTTP header names do.
func lookupKey(m map[string]any, header string) (string, bool) {
	for k, v := range m {
		if strings.EqualFold(k, header) {
			s, _ := v.(string)
			return strings.TrimSpace(s), true
		}
	}
	return "", false
}

// operationAuth remembers, for one GraphQL operation, the agent and the
// merchant it authenticated, so a key is read once per operation however
// many fields need it. What it costs against the rate limits is counted
// per field (chargeAgent, allowPublic): every root field, aliases and
// repeats included, is one request, as its REST counterpart is.
type operationAuth struct {
	mu sync.Mutex

	agentDone bool
	agent     *ent.Agent
	agentErr  error

	merchantDone bool
	merchant     *agentpay.MerchantAuth
	merchantErr  error

	viewerDone bool
	viewer     *agentpay.Viewer
	viewerErr  error
}

type operationAuthKey struct{}

// newOperationAuth starts each operation (query, mutation, or subscription,
// also on a websocket) with nothing authenticated yet.
func newOperationAuth(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	return next(context.WithValue(ctx, operationAuthKey{}, &operationAuth{}))
}

func operationAuthFrom(ctx context.Context) *operationAuth {
	if a, ok := ctx.Value(operationAuthKey{}).(*operationAuth); ok {
		return a
	}
	return &operationAuth{} // outside an operation: nothing shared
}

// chargeAgent authenticates the operation's key (once per operation) and
// counts one request against the agent's rate limit (on every call),
// through the service's AuthenticateAndAllow and AllowAgent as the REST
// facade's requireAgent does. The fields that do what a REST request does
// call it: the agent's root fields (me, send, regenerateApiKey, node and
// nodes with a key) and Me.balance and Me.limits, so ten aliased sends or
// balances are ten requests. Missing or bad keys are the service's
// ErrUnauthorized (UNAUTHENTICATED), a refused call its ErrRateLimited
// (RATE_LIMITED). The decision shows as headers whenever the key
// authenticated, refused or not.
func (r *Resolver) chargeAgent(ctx context.Context) (*ent.Agent, error) {
	op := operationAuthFrom(ctx)
	op.mu.Lock()
	defer op.mu.Unlock()
	var (
		dec agentpay.RateDecision
		err error
	)
	switch {
	case !op.agentDone:
		op.agentDone = true
		op.agent, dec, err = r.cfg.Service.AuthenticateAndAllow(ctx, credentialsFrom(ctx).apiKey)
		if op.agent == nil {
			op.agentErr = err
			return nil, err
		}
	case op.agent == nil:
		return nil, op.agentErr
	default:
		dec, err = r.cfg.Service.AllowAgent(ctx, op.agent)
	}
	credentialsFrom(ctx).rate.show(dec, true)
	if err != nil {
		return nil, presentRateLimit(err)
	}
	return op.agent, nil
}

// currentAgent is the operation's agent for a field inside one that was
// charged (Me's fields, Wallet.primary): it counts nothing more. Reached
// before any charge, it charges.
func (r *Resolver) currentAgent(ctx context.Context) (*ent.Agent, error) {
	op := operationAuthFrom(ctx)
	op.mu.Lock()
	done, agent, err := op.agentDone, op.agent, op.agentErr
	op.mu.Unlock()
	if !done {
		return r.chargeAgent(ctx)
	}
	if agent == nil {
		return nil, err
	}
	return agent, nil
}

// agentContext charges the operation's agent (chargeAgent) and attaches it
// to the context as the caller the service layer checks ownership against
// (Node).
func (r *Resolver) agentContext(ctx context.Context) (context.Context, *ent.Agent, error) {
	agent, err := r.chargeAgent(ctx)
	if err != nil {
		return ctx, nil, err
	}
	return agentpay.WithCallerAgent(ctx, agent), agent, nil
}

// currentMerchant authenticates the operation's merchant secret key, once
// per operation, as the REST facade's requireMerchant does: a missing,
// unknown or rolled key is ErrUnauthorized (UNAUTHENTICATED), a deactivated
// merchant's key ErrForbidden (FORBIDDEN). Like the REST merchant routes,
// authenticated merchant operations have no rate limit.
//
// Without a secret key, a dashboard session (X-Dashboard-Session) is the
// merchant credential (AuthenticateDashboard): its merchant in its mode,
// as a secret key of that mode. Its member's role is the service's to
// enforce: every change a read-only member asks for is FORBIDDEN
// (MerchantAuth.CheckMutate, called by each changing service method).
func (r *Resolver) currentMerchant(ctx context.Context) (*agentpay.MerchantAuth, error) {
	op := operationAuthFrom(ctx)
	op.mu.Lock()
	defer op.mu.Unlock()
	if !op.merchantDone {
		op.merchantDone = true
		c := credentialsFrom(ctx)
		if c.merchantKey == "" && c.dashboard != "" {
			op.merchant, op.merchantErr = r.cfg.Service.AuthenticateDashboard(ctx, c.dashboard)
		} else {
			op.merchant, op.merchantErr = r.cfg.Service.AuthenticateMerchant(ctx, c.merchantKey)
		}
	}
	return op.merchant, op.merchantErr
}

// merchantContext authenticates the operation's merchant and attaches it
// to the context as the caller the service layer checks ownership against
// (Node).
func (r *Resolver) merchantContext(ctx context.Context) (context.Context, *agentpay.MerchantAuth, error) {
	auth, err := r.currentMerchant(ctx)
	if err != nil {
		return ctx, nil, err
	}
	return agentpay.WithCallerMerchant(ctx, auth), auth, nil
}

// ownMerchant is the caller behind a Merchant object: the operation's
// authenticated merchant, the only merchant whose object it can reach.
func (r *Resolver) ownMerchant(ctx context.Context, m *ent.Merchant) (*agentpay.MerchantAuth, error) {
	auth, err := r.currentMerchant(ctx)
	if err != nil {
		return nil, err
	}
	if auth.Merchant.ID != m.ID {
		return nil, agentpay.ErrNotFound
	}
	return auth, nil
}

// nodeContext is agentContext for node lookups, where a key is optional:
// without one the lookup goes ahead as an anonymous caller (limited per
// client IP), who may see no object; with one it must authenticate. An
// agent key decides when both kinds are sent; a merchant secret key alone
// makes the lookup the merchant's (its objects in its key's mode).
func (r *Resolver) nodeContext(ctx context.Context) (context.Context, error) {
	c := credentialsFrom(ctx)
	switch {
	case c.apiKey != "":
		ctx, _, err := r.agentContext(ctx)
		return ctx, err
	case c.merchantKey != "", c.dashboard != "":
		ctx, _, err := r.merchantContext(ctx)
		return ctx, err
	}
	return ctx, r.allowPublic(ctx)
}

// requireAdmin lets an admin query through only with the admin key
// (agentpay's adminkey.go), after the per-IP limit, which also bounds
// guessing.
func (r *Resolver) requireAdmin(ctx context.Context) error {
	if err := r.allowPublic(ctx); err != nil {
		return err
	}
	return r.cfg.Service.AuthenticateAdmin(credentialsFrom(ctx).adminKey)
}

// allowPublic counts one unauthenticated request against the client IP's
// limit on every call: each public root field (aliases included) is one
// request, as on REST.
func (r *Resolver) allowPublic(ctx context.Context) error {
	return presentRateLimit(r.allowIP(ctx, agentpay.RateRequest))
}

// allowRegistration applies the per-IP registration limit: every
// registration counts, even several in one operation.
func (r *Resolver) allowRegistration(ctx context.Context) error {
	if err := r.allowPublic(ctx); err != nil {
		return err
	}
	return presentRateLimit(r.allowIP(ctx, agentpay.RateRegistration))
}

func (r *Resolver) allowIP(ctx context.Context, kind agentpay.RateKind) error {
	dec, err := r.cfg.Service.AllowIP(ctx, credentialsFrom(ctx).ip, kind)
	// The registration limit shows only when it is the tighter one, as on
	// the REST facade.
	credentialsFrom(ctx).rate.show(dec, kind != agentpay.RateRegistration || err != nil)
	return err
}

// meAgent is the agent behind a Me object: the operation's authenticated
// agent, which is the only agent a Me is ever built for. charge counts the
// field as a request of its own (chargeAgent).
func (r *Resolver) meAgent(ctx context.Context, me *model.Me, charge bool) (*ent.Agent, error) {
	get := r.currentAgent
	if charge {
		get = r.chargeAgent
	}
	agent, err := get(ctx)
	if err != nil {
		return nil, err
	}
	if agent.ID != me.ID {
		return nil, agentpay.ErrForbidden
	}
	return agent, nil
}

// rateHeaders shows rate decisions on a GraphQL HTTP answer as the REST
// facade does (httpx.ShowRate), for the resolvers of one operation, which
// may run concurrently.
type rateHeaders struct {
	mu sync.Mutex
	h  http.Header
}

// show writes dec; unless replace, only if it leaves fewer requests than
// the decision already shown.
func (rh *rateHeaders) show(dec agentpay.RateDecision, replace bool) {
	if rh == nil {
		return
	}
	rh.mu.Lock()
	defer rh.mu.Unlock()
	httpx.ShowRate(rh.h, dec, replace)
}

// presentRateLimit adds the refusing window to a RATE_LIMITED error's
// extensions (retryAfter in seconds, limit, remaining, reset in Unix
// seconds, window), what the headers say on the REST facade. A new error
// each time: gqlgen sets the path of the field on it.
func presentRateLimit(err error) error {
	var rl *agentpay.RateLimitError
	if !errors.As(err, &rl) {
		return err
	}
	d := rl.Decision
	return &gqlerror.Error{Message: err.Error(), Err: err, Extensions: map[string]any{
		"retryAfter": d.RetryAfterSeconds(),
		"limit":      d.Limit,
		"remaining":  max(d.Remaining, 0),
		"reset":      d.Reset.Unix(),
		"window":     d.Window,
	}}
}

// currentViewer is the signed-in human of the operation's browser session
// cookie, read once per operation: without a valid session
// ErrNotSignedIn (UNAUTHENTICATED), without the session's CSRF token
// ErrCSRF (FORBIDDEN), on every field, queries included, so another site's
// page can neither change nor read anything with the cookie. Each call
// counts one request against the client IP's limit, as public fields do.
func (r *Resolver) currentViewer(ctx context.Context) (*agentpay.Viewer, error) {
	if err := r.allowPublic(ctx); err != nil {
		return nil, err
	}
	op := operationAuthFrom(ctx)
	op.mu.Lock()
	defer op.mu.Unlock()
	if !op.viewerDone {
		op.viewerDone = true
		c := credentialsFrom(ctx)
		op.viewer, op.viewerErr = r.cfg.Service.AuthenticateBrowser(ctx, c.session)
		if op.viewerErr == nil {
			op.viewerErr = op.viewer.CheckCSRF(c.csrf)
		}
	}
	return op.viewer, op.viewerErr
}
