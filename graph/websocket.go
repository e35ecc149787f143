package graph

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"

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
