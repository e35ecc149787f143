package graph

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"agentpay"
	"agentpay/internal/httpx"
)

// HandlerConfig wires the GraphQL server.
type HandlerConfig struct {
	Service *agentpay.Service
	Logger  *slog.Logger
	// AllowedOrigins may open websocket subscriptions from a browser besides
	// the API's own host ("*" allows any).
	AllowedOrigins []string
	// HeadPollInterval is how often chain head subscriptions look for a new
	// head (in the service's head cache: no call to a node).
	HeadPollInterval time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client (httpx.ClientIP); none: the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// Introspection answers __schema and __type queries (tools and the
	// playground need them); off, they fail and the schema is not shown.
	Introspection bool
	// WebsocketInitTimeout is how long a websocket may take to send
	// connection_init; 0 is websocketInitTimeout.
	WebsocketInitTimeout time.Duration
}

// NewHandler serves queries and mutations over HTTP and subscriptions over
// websocket (graphql-transport-ws and the older graphql-ws) on one path.
// Agents authenticate with the X-Agent-Key header, or on a websocket with
// the connection_init payload (see auth.go).
func NewHandler(cfg HandlerConfig) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HeadPollInterval <= 0 {
		cfg.HeadPollInterval = time.Second
	}
	if cfg.WebsocketInitTimeout <= 0 {
		cfg.WebsocketInitTimeout = websocketInitTimeout
	}
	srv := handler.New(NewExecutableSchema(Config{Resolvers: &Resolver{cfg: cfg}, Directives: directives(), Complexity: complexity()}))
	readLimit := int64(httpx.MaxBodyBytes)
	srv.AddTransport(&transport.Websocket{
		Implementation:        newGorillaWebsocket(cfg.AllowedOrigins),
		KeepAlivePingInterval: 10 * time.Second,
		InitFunc:              websocketInit(cfg.Service),
		InitTimeout:           cfg.WebsocketInitTimeout,
		PayloadReadLimit:      &readLimit,
	})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetErrorPresenter(presentError(cfg.Logger))
	srv.SetRecoverFunc(recoverPanic(cfg.Logger))
	srv.SetParserTokenLimit(maxQueryTokens)
	srv.SetQueryCache(lru.New[*ast.QueryDocument](queryCacheSize))
	// Bounds first: queryLimits refuses a long query before the persisted
	// query cache keeps it, and a deep or wide one before the complexity
	// walk (limits.go).
	srv.Use(queryLimits{introspection: cfg.Introspection})
	srv.Use(extension.FixedComplexityLimit(maxComplexity))
	if cfg.Introspection {
		srv.Use(extension.Introspection{})
	}
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	srv.AroundOperations(limitSocketOperations)
	srv.AroundOperations(newOperationAuth)
	return limitBody(withRequestCredentials(limitConnections(cfg.Service, cfg.TrustedProxies, srv), cfg.TrustedProxies))
}
