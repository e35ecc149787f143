package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"agentpay"
	"agentpay/app"
	"agentpay/cardissuer"
	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/graph"
	"agentpay/graph/playground"
	"agentpay/identity"
	"agentpay/identity/devpartner"
	"agentpay/internal/jobs"
	"agentpay/internal/mail"
	"agentpay/internal/metrics"
	"agentpay/internal/store"
	"agentpay/internal/treasury"
	"agentpay/internal/vault"
	"agentpay/mcp"
	"agentpay/payout"
	paysandbox "agentpay/payout/sandbox"
	"agentpay/rest"
	"agentpay/web"
	"agentpay/worker"
)

// platform is what every command shares: the database, the vault, the
// chain families and the treasury.
type platform struct {
	db       *store.DB
	vault    *vault.Vault
	families chains.Families
	treasury agentpay.TreasuryKeys
	// identity verifies humans: the sandbox under `agentpay dev`, else
	// none (no real provider is integrated yet).
	identity identity.Provider
	// metrics records the process's series; nil when METRICS_ADDR is off.
	metrics *metrics.Metrics
	// cards issues card purchases' cards: the sandbox under `agentpay
	// dev`, else none (no real issuer is integrated yet: requests are 503).
	cards cardissuer.Issuer
}

func openPlatform(ctx context.Context, cfg config, masterKey []byte) (*platform, error) {
	if strings.HasPrefix(cfg.DatabaseURL, "file:") {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("DATA_DIR: %w", err)
		}
	}
	v, err := vault.New(masterKey)
	if err != nil {
		return nil, fmt.Errorf("MASTER_KEY: %w", err)
	}
	families := adapters.Families()
	tk, err := treasury.Derive(v, families)
	if err != nil {
		return nil, err
	}
	db, err := store.OpenDB(ctx, store.DBConfig{URL: cfg.DatabaseURL})
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	return &platform{db: db, vault: v, families: families, treasury: tk}, nil
}

// requireMasterKey refuses to run serve or worker without MASTER_KEY: a
// generated key would make every stored wallet key unreadable next start.
func requireMasterKey(cfg config) ([]byte, error) {
	if cfg.MasterKey == nil {
		return nil, errors.New("MASTER_KEY: required (32 bytes, base64 or hex); `agentpay dev` generates one for local use")
	}
	return cfg.MasterKey, nil
}

// devMasterKey uses MASTER_KEY when set, else the key kept in DATA_DIR,
// generating it on first start.
func devMasterKey(cfg config) ([]byte, error) {
	if cfg.MasterKey != nil {
		return cfg.MasterKey, nil
	}
	path := filepath.Join(cfg.DataDir, "master.key")
	if b, err := os.ReadFile(path); err == nil {
		key, err := vault.ParseMasterKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: not a valid master key", path)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := vault.GenerateMasterKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("DATA_DIR: %w", err)
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%x\n", key)), 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// buildNetworks connects every configured chain of one mode; the treasury
// pays gas and fees, and every call to a node is bounded by rpcTimeout.
// A chain whose node fails at start does not stop the process: it is
// served not ready and started in the background until ctx ends
// (adapters.Chain.StartInBackground), so under an orchestrator's restarts
// one dropped RPC call cannot keep a process down.
func buildNetworks(ctx context.Context, cfgs map[chains.Name]chainConfig, treasury agentpay.TreasuryKeys, rpcTimeout time.Duration, logger *slog.Logger) (chains.Networks, error) {
	nets := chains.Networks{}
	for name, cc := range cfgs {
		n, err := adapters.Network(ctx, name, adapters.Chain{
			RPCURL: cc.RPCURL, USDC: cc.USDC, Confirmations: cc.Confirmations, GasKey: treasury.Key(name),
			RPCTimeout: rpcTimeout, StartInBackground: true, Logger: logger,
		})
		if err != nil {
			return nil, err
		}
		nets[name] = n
	}
	return nets, nil
}

// newHTTPHandler serves REST, GraphQL and the playground on one router.
// Introspection and the playground are on in `dev` and off in `serve`
// unless GRAPHQL_INTROSPECTION / GRAPHQL_PLAYGROUND say otherwise: a
// production API need not publish its schema to anyone who asks.
//
// devPages are the dev-only pages of the outside services' sandboxes
// (path -> handler), mounted beside the API under `agentpay dev`.
func newHTTPHandler(cfg config, svc *agentpay.Service, logger *slog.Logger, dev bool, devPages map[string]http.Handler, obs rest.HTTPObserver) http.Handler {
	introspection, showPlayground := graphQLSurface(cfg, dev)
	gql := graph.NewHandler(graph.HandlerConfig{
		Service: svc, Logger: logger, AllowedOrigins: cfg.AllowedOrigins,
		TrustedProxies: cfg.TrustedProxies, Introspection: introspection,
	})
	mounts := map[string]http.Handler{
		"/graphql": gql,
		// The agent's tools for LLM clients (MCP, streamable HTTP; the
		// agent key as bearer).
		"/mcp": mcp.NewHandler(mcp.Config{Service: svc, Logger: logger}),
	}
	appPrefix := appPath(cfg.AppURL)
	human := app.NewHandler(app.Config{
		Service: svc, Logger: logger, Prefix: appPrefix, URL: cfg.AppURL, GraphQLPath: "/graphql",
		SecureCookies: strings.HasPrefix(cfg.AppURL, "https://"), TrustedProxies: cfg.TrustedProxies,
	})
	if cfg.PasskeyRPID == "" {
		logger.Warn("passkeys are off: APP_URL's host is an IP address, which WebAuthn refuses as a relying party id; "+
			"set APP_URL to a domain name (http://localhost:<port>/app locally)", "app_url", cfg.AppURL)
	}
	mounts[appPrefix] = human
	mounts[appPrefix+"/*"] = human
	if showPlayground {
		// GraphiQL from the binary's own files (package playground).
		pg := playground.New(playground.Config{Path: "/playground", Endpoint: "/graphql"})
		mounts["/playground"] = pg
		mounts["/playground/*"] = pg
	}
	for path, h := range devPages {
		mounts[path] = h
	}
	return rest.NewRouter(rest.Config{
		Service:        svc,
		Logger:         logger,
		Dev:            dev,
		Pages:          web.NewHandler(web.Config{Service: svc, Logger: logger, GraphQLPath: "/graphql"}),
		Mounts:         mounts,
		TrustedProxies: cfg.TrustedProxies,
		Observer:       obs,
	})
}

// appPath is where this binary serves the human app: APP_URL's path
// ("/app" by default; "/app" too when APP_URL has none, since the API
// answers at the root).
func appPath(appURL string) string {
	u, err := url.Parse(appURL)
	if err != nil || strings.Trim(u.Path, "/") == "" {
		return "/app"
	}
	return "/" + strings.Trim(u.Path, "/")
}

// graphQLSurface is whether GraphQL introspection and the playground are
// served: as configured, else only in `dev`.
func graphQLSurface(cfg config, dev bool) (introspection, playground bool) {
	introspection, playground = dev, dev
	if cfg.GraphQLIntrospection != nil {
		introspection = *cfg.GraphQLIntrospection
	}
	if cfg.GraphQLPlayground != nil {
		playground = *cfg.GraphQLPlayground
	}
	return introspection, playground
}

// httpTimeouts bound how long a connection may take over each part of a
// request, so slow or idle clients cannot hold connections (and their
// goroutines and buffers) open.
type httpTimeouts struct {
	// ReadHeader: the request line and headers; Read: the whole request,
	// body included (1 MiB at most).
	ReadHeader, Read time.Duration
	// Write: from the end of the headers to the end of the answer. A send
	// waits up to 30 s for inclusion (agentpay.DefaultSendWait) and a
	// GraphQL operation holds at most three (graph's cost table).
	// Websockets clear it (and Read) when they upgrade: they stream for as
	// long as they are open.
	Write time.Duration
	// Idle: a kept-alive connection between requests.
	Idle time.Duration
}

var defaultHTTPTimeouts = httpTimeouts{
	ReadHeader: 10 * time.Second,
	Read:       30 * time.Second,
	Write:      2 * time.Minute,
	Idle:       2 * time.Minute,
}

// maxHeaderBytes bounds a request's line and headers (Go's default is
// 1 MiB). GraphQL GET queries travel in the URL: a longer one goes by POST.
const maxHeaderBytes = 64 << 10

// newHTTPServer is the API's server with its timeouts and header bound.
func newHTTPServer(h http.Handler, t httpTimeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// serveHTTP listens on addr and serves until ctx ends, then drains.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	srv := newHTTPServer(h, defaultHTTPTimeouts)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logger.Info("shutting down")
	return srv.Shutdown(shutdownCtx)
}

func runMigrate(ctx context.Context, cfg config, logger *slog.Logger) error {
	if strings.HasPrefix(cfg.DatabaseURL, "file:") {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return fmt.Errorf("DATA_DIR: %w", err)
		}
	}
	db, err := store.OpenDB(ctx, store.DBConfig{URL: cfg.DatabaseURL})
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	defer db.Close()
	if err := store.Migrate(ctx, db); err != nil {
		return err
	}
	logger.Info("migrations applied", "dialect", db.Dialect)
	return nil
}

func runServe(ctx context.Context, cfg config, logger *slog.Logger) error {
	key, err := requireMasterKey(cfg)
	if err != nil {
		return err
	}
	p, err := openPlatform(ctx, cfg, key)
	if err != nil {
		return err
	}
	defer p.db.Close()
	if p.metrics, _, err = startMetrics(ctx, cfg, false, logger); err != nil {
		return err
	}
	svc, err := p.service(ctx, cfg, logger, nil, nil, nil)
	if err != nil {
		return err
	}
	cacheCheckoutStatuses(ctx, svc, logger)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP_ADDR: %w", err)
	}
	logger.Info("serving", "addr", "http://"+ln.Addr().String())
	return serveHTTP(ctx, ln, serveHTTPHandler(cfg, svc, logger, httpObserver(p.metrics)), logger)
}

// cacheCheckoutStatuses has the status polls answered from memory while
// the process hears the status bus (agentpay.Service.CacheCheckoutStatuses);
// without it (the listener cannot connect) every poll reads the database,
// which serves as before.
func cacheCheckoutStatuses(ctx context.Context, svc *agentpay.Service, logger *slog.Logger) {
	if err := svc.CacheCheckoutStatuses(ctx); err != nil {
		logger.Warn("checkout status polls read the database on every request", "err", err)
	}
}

// serveHTTPHandler is the router `agentpay serve` serves: no dev route,
// no sandbox page (devHTTPHandler adds them for `agentpay dev`).
func serveHTTPHandler(cfg config, svc *agentpay.Service, logger *slog.Logger, obs rest.HTTPObserver) http.Handler {
	return newHTTPHandler(cfg, svc, logger, false, nil, obs)
}

func runWorker(ctx context.Context, cfg config, logger *slog.Logger) error {
	key, err := requireMasterKey(cfg)
	if err != nil {
		return err
	}
	p, err := openPlatform(ctx, cfg, key)
	if err != nil {
		return err
	}
	defer p.db.Close()
	if cfg.SMTPURL == "" {
		logger.Warn("SMTP_URL is not set: e-mail (sign-in links, invitations, pairing requests) stays unsent in the outbox until a worker runs with it")
	}
	if p.metrics, _, err = startMetrics(ctx, cfg, false, logger); err != nil {
		return err
	}
	jobs := &lateJobs{}
	svc, err := p.service(ctx, cfg, logger, nil, nil, jobs)
	if err != nil {
		return err
	}
	w, err := newWorker(p.db, svc, logger, jobs, workerObserver(p.metrics))
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// newWorker builds the worker's River client and makes it the service's job
// inserter (see lateJobs).
func newWorker(db *store.DB, svc *agentpay.Service, logger *slog.Logger, jobs *lateJobs, obs worker.Observer) (*worker.Worker, error) {
	w, err := worker.New(worker.Config{DB: db, Service: svc, Logger: logger, Observer: obs})
	if err != nil {
		return nil, err
	}
	jobs.bind(w.Client())
	return w, nil
}

// lateJobs is the service's job inserter in processes that also work jobs
// (worker, dev). The worker's River client needs the service (its workers
// call it) and the service needs a job inserter, so the service is built
// with a lateJobs and the worker's client is bound into it by newWorker,
// right after worker.New and before the worker runs or the API serves.
// Inserting before that is an error, never a silent loss.
type lateJobs struct {
	client atomic.Pointer[river.Client[*sql.Tx]]
}

var _ jobs.Inserter = (*lateJobs)(nil)

func (j *lateJobs) bind(c *river.Client[*sql.Tx]) { j.client.Store(c) }

func (j *lateJobs) InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	c := j.client.Load()
	if c == nil {
		return nil, errors.New("agentpay: job inserter used before the worker's River client was bound")
	}
	return c.InsertTx(ctx, tx, args, opts)
}

// service connects the configured chains (test mode may be overridden by
// the devnets) and builds the service layer.
// service builds the service the commands run; a nil inserter is an
// insert-only River client on the platform's database.
func (p *platform) service(ctx context.Context, cfg config, logger *slog.Logger, test chains.Networks, faucet agentpay.Faucet, inserter jobs.Inserter) (*agentpay.Service, error) {
	live, err := buildNetworks(ctx, cfg.Chains[agentpay.ModeLive], p.treasury, cfg.RPCTimeout, logger)
	if err != nil {
		return nil, err
	}
	if test == nil {
		if test, err = buildNetworks(ctx, cfg.Chains[agentpay.ModeTest], p.treasury, cfg.RPCTimeout, logger); err != nil {
			return nil, err
		}
	}
	dev := faucet != nil
	agentMode := cfg.AgentMode
	if dev {
		agentMode = agentpay.ModeTest
	}
	if inserter == nil {
		// The API and the admin commands only insert jobs (webhook
		// deliveries, e-mail...) in their transactions; worker processes
		// work them.
		if inserter, err = river.NewClient(p.db.RiverDriver(), &river.Config{}); err != nil {
			return nil, err
		}
	}
	mailer, err := newMailer(cfg, faucet != nil)
	if err != nil {
		return nil, err
	}
	// `dev` runs an identity partner of its own, so verify-partner works
	// offline (/dev/partner/attest).
	var devPartner agentpay.DevPartner
	if dev {
		d, err := devpartner.New()
		if err != nil {
			return nil, err
		}
		devPartner = d
	}
	return agentpay.NewService(agentpay.Config{
		DB: p.db, Vault: p.vault, Logger: logger, Treasury: p.treasury, Families: p.families,
		Live: live, Test: test, Faucet: faucet, AgentMode: agentMode, InternalSettlement: cfg.InternalSettlement, Jobs: inserter, Mailer: mailer,
		AfterBroadcast:   cfg.afterBroadcast(),
		IdentityProvider: p.identity, Observer: serviceObserver(p.metrics),
		CardIssuer: p.cards, CardRequestTTL: cfg.CardRequestTTL, SpendApprovalTTL: cfg.SpendApprovalTTL,
		BaseURL: cfg.BaseURL, PayURL: cfg.PayURL, AppURL: cfg.AppURL,
		PasskeyRPID: cfg.PasskeyRPID, PasskeyOrigins: passkeyOrigins(cfg),
		Partners: cfg.Partners, DevPartner: devPartner,
		SessionTTL: cfg.SessionTTL, WebhookRetryDelays: cfg.WebhookRetryDelays,
		LatePaymentWindow: cfg.LatePaymentWindow, WebhookRetention: cfg.WebhookRetention, Settlement: cfg.settlementOptions(dev), MaxOpenSessions: cfg.MaxOpenSessions, SelectRateLimit: cfg.SelectRateLimit,
		RelayIPRateLimit: cfg.RelayIPRateLimit, RelayMerchantRateLimit: cfg.RelayMerchantRateLimit,
		WebhookAllowPrivate: cfg.webhookAllowPrivate(dev), WebhookMerchantConcurrency: cfg.WebhookMerchantConcurrency,
		WebhookSlowConcurrency: cfg.WebhookSlowConcurrency,
		SignInRateLimit:        cfg.SignInRateLimit, SignInEmailRateLimit: cfg.SignInEmailLimit, AgentMailDailyLimit: cfg.AgentMailLimit,
		Withdrawals: agentpay.WithdrawalLimits{PerWithdrawal: cfg.WithdrawalLimit, Daily: cfg.WithdrawalDailyLimit}, SendMinimums: cfg.SendMinimums,
		DustMinimums: cfg.DustMinimums, GasTokenPrices: cfg.GasTokenPrices,
		IPRateLimit: cfg.IPRateLimit, RegisterRateLimit: cfg.RegisterRateLimit,
		ProbeRateLimit: cfg.ProbeRateLimit, ConnectionsPerIP: cfg.ConnectionsPerIP, HeadCacheTTL: cfg.HeadCacheTTL,
		AuthCacheTTL: serviceAuthCacheTTL(cfg.AuthCacheTTL), AdminKeyHash: cfg.AdminKeyHash,
		// Test money settles fiat through the sandbox; no live PIX provider
		// is integrated yet, so live fiat_pix settlements wait
		// (docs/checkout.md, Settlement).
		Payouts: map[agentpay.Mode]payout.Provider{
			agentpay.ModeTest: paysandbox.New(paysandbox.DefaultRate),
		},
	})
}

// newMailer is what sends the outbox's e-mail: SMTP when SMTP_URL is set,
// else under `agentpay dev` the catcher (/dev/mail), else nothing: serve
// only queues mail, and a worker without SMTP_URL leaves it unsent in the
// outbox, its jobs retrying until a worker with SMTP_URL runs them
// (docs/humans.md, E-mail).
func newMailer(cfg config, dev bool) (mail.Sender, error) {
	switch {
	case cfg.SMTPURL != "":
		return mail.NewSMTP(mail.Config{URL: cfg.SMTPURL, From: cfg.MailFrom})
	case dev:
		return mail.NewCatcher(nil), nil
	}
	return nil, nil
}

// passkeyOrigins are the origins whose passkey answers the service takes:
// APP_URL's, or none when passkeys are off.
func passkeyOrigins(cfg config) []string {
	if cfg.PasskeyRPID == "" {
		return nil
	}
	return []string{cfg.PasskeyOrigin}
}

// serviceAuthCacheTTL maps AUTH_CACHE_TTL (0: off) to Config.AuthCacheTTL
// (0: the default, negative: off).
func serviceAuthCacheTTL(ttl time.Duration) time.Duration {
	if ttl == 0 {
		return -1
	}
	return ttl
}
