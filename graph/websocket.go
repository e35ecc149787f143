package graph

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"agentpay"
	"agentpay/internal/httpx"
)

// gorillaWebsocket plugs gorilla/websocket into gqlgen's websocket transport.
type gorillaWebsocket struct {
	upgrader websocket.Upgrader
}

// newGorillaWebsocket accepts browser connections only from the allowed
// origins, so another site cannot open a subscription with a visitor's
// credentials. Non-browser clients send no Origin and are accepted.
func newGorillaWebsocket(allowedOrigins []string) *gorillaWebsocket {
	allowed := make(map[string]bool, len(allowedOrigins))
	for _, o := range allowedOrigins {
		allowed[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	return &gorillaWebsocket{upgrader: websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		CheckOrigin: func(r *http.Request) bool {
			origin := r.Header.Get("Origin")
			if origin == "" {
				return true
			}
			u, err := url.Parse(origin)
			if err != nil {
				return false
			}
			if strings.EqualFold(u.Host, r.Host) || allowed[strings.ToLower(u.Scheme+"://"+u.Host)] {
				return true
			}
			return allowed["*"]
		},
	}}
}

// Accept upgrades the connection. A websocket streams for as long as it is
// open, so it is exempt from the server's ReadTimeout and WriteTimeout:
// gorilla's Upgrade clears the deadlines they set on the connection it
// takes over (cmd/agentpay's TestHTTPServerBounds holds it to that). The
// transport's init timeout, its keep-alives and the per-socket operation
// limit bound a socket instead.
func (g *gorillaWebsocket) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	up := g.upgrader
	up.Subprotocols = opts.Subprotocols
	conn, err := up.Upgrade(w, r, opts.ResponseHeader)
	if err != nil {
		return nil, err
	}
	return &gorillaConn{Conn: conn}, nil
}

type gorillaConn struct {
	*websocket.Conn
}

// NextReader reports a normal close as transport.ErrWebsocketClosed, as the
// transport expects from every adapter.
func (c *gorillaConn) NextReader() (int, io.Reader, error) {
	t, r, err := c.Conn.NextReader()
	var ce *websocket.CloseError
	if errors.As(err, &ce) && (ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway || ce.Code == websocket.CloseNoStatusReceived) {
		return t, nil, transport.ErrWebsocketClosed
	}
	return t, r, err
}

func (c *gorillaConn) WriteClose(code int, message string) error {
	return c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, message), time.Now().Add(time.Second))
}

// limitConnections holds, for each websocket, one of its client IP's
// connections on this process (Service.OpenConnection) for as long as the
// connection lives (the transport serves it within the request). An upgrade
// over the limit is refused with 429 {"detail"} before any websocket work;
// the hosted checkout page then falls back to polling.
func limitConnections(svc *agentpay.Service, proxies []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !websocket.IsWebSocketUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		release, err := svc.OpenConnection(httpx.ClientIP(r, proxies))
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(map[string]string{"detail": err.Error()})
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// A websocket is bounded in time before it says who it is, and in the work
// it runs at once; its messages are bounded like request bodies
// (httpx.MaxBodyBytes, the transport's PayloadReadLimit).
const (
	// websocketInitTimeout is how long a websocket may take to send
	// connection_init before it is closed.
	websocketInitTimeout = 5 * time.Second
	// maxSocketOperations bounds the operations (subscriptions, and queries
	// sent over the socket) running at once on one websocket.
	maxSocketOperations = 10
	// codeTooManyOps refuses an operation over maxSocketOperations.
	codeTooManyOps = "TOO_MANY_OPERATIONS"
)

// socketOperations counts the operations running on one websocket.
type socketOperations struct {
	mu      sync.Mutex
	running int
}

type socketOperationsKey struct{}

// withSocketOperations gives a websocket's context (its connection_init's)
// its operation count.
func withSocketOperations(ctx context.Context) context.Context {
	return context.WithValue(ctx, socketOperationsKey{}, &socketOperations{})
}

// limitSocketOperations refuses an operation on a websocket that already
// runs maxSocketOperations. The operation's slot frees when its stream
// ends (before the socket says complete, so a client that saw complete can
// start another at once), or at the latest when its context ends with the
// operation or the socket. Plain HTTP operations carry no count and are not
// limited here.
func limitSocketOperations(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	ops, _ := ctx.Value(socketOperationsKey{}).(*socketOperations)
	if ops == nil {
		return next(ctx)
	}
	ops.mu.Lock()
	full := ops.running >= maxSocketOperations
	if !full {
		ops.running++
	}
	ops.mu.Unlock()
	if full {
		err := gqlerror.Errorf("at most %d operations may run at once on one websocket", maxSocketOperations)
		errcode.Set(err, codeTooManyOps)
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{err}})
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			ops.mu.Lock()
			ops.running--
			ops.mu.Unlock()
		})
	}
	context.AfterFunc(ctx, release)
	responses := next(ctx)
	return func(ctx context.Context) *graphql.Response {
		r := responses(ctx)
		if r == nil {
			release()
		}
		return r
	}
}
