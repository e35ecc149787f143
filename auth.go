package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/merchant"
	"agentpay/ent/merchantkey"
	"agentpay/ent/predicate"
	"agentpay/ent/wallet"
	"agentpay/internal/authcache"
	"agentpay/internal/clock"
	"agentpay/internal/ratelimit"
	"agentpay/internal/vault"
)

// Authentication: what a presented key is. Agents present an API key
// (X-Agent-Key); merchants a secret key (X-Checkout-Secret-Key), or on the
// checkout page a public key. Every key is looked up by the unique index on
// its hash (public keys: the key itself), through the authentication caches
// below. Issuing keys (registration, regeneration, rolls) is the agent's and
// the merchant's own business (agent_accounts.go, merchant_accounts.go).

// Authenticate returns the agent whose API key this is, with its wallets
// (Edges.Wallets, in Wallets order) read in the same query. A missing,
// malformed, unknown or rotated key is ErrUnauthorized. It is one lookup by
// the unique index on the key's hash, through the authentication cache:
// what a key authenticated is trusted for AuthCacheTTL.
//
// The agent is read with raw SQL, not through the ent client: use its
// fields, not its methods that go back to the database (Update, QueryX).
func (s *Service) Authenticate(ctx context.Context, apiKey string) (*ent.Agent, error) {
	if !vault.WellFormedSecret(apiKey, vault.PrefixAgentKey) {
		return nil, ErrUnauthorized
	}
	return s.authenticateAgent(ctx, vault.HashSecret(apiKey))
}

// authenticateAgent is Authenticate by the key's hash.
func (s *Service) authenticateAgent(ctx context.Context, hash []byte) (*ent.Agent, error) {
	if a, ok := s.agentAuth.Get(string(hash)); ok {
		return a, nil
	}
	// Requests of a key that arrive while it is being read share that read
	// (a result no older than a cache entry would be).
	return s.agentAuth.Share(string(hash), func() (*ent.Agent, error) {
		q := authSQLite
		if s.cfg.DB.IsPostgres() {
			q = authPostgres
		}
		read := s.agentAuth.Begin()
		rows, err := s.cfg.DB.QueryCached(context.WithoutCancel(ctx), q, hash)
		if err != nil {
			return nil, fmt.Errorf("authenticating agent: %w", err)
		}
		a, err := scanAuthRows(rows, nil)
		if err != nil {
			return nil, fmt.Errorf("authenticating agent: %w", err)
		}
		if a == nil {
			return nil, ErrUnauthorized
		}
		s.agentAuth.Put(read, string(hash), a)
		return a, nil
	})
}

// AuthenticateAndAllow authenticates the key as Authenticate does, then
// counts the request against the agent's rate limit as AllowAgent does: the
// one path of every agent request, REST and GraphQL. On PostgreSQL a
// request costs one round trip: the key's read, or, when this instance must
// reserve more of the agent's rate limit, the read and the reservation in
// one statement (internal/ratelimit). A refused request returns the agent,
// the decision and a *RateLimitError.
func (s *Service) AuthenticateAndAllow(ctx context.Context, apiKey string) (*ent.Agent, RateDecision, error) {
	if !vault.WellFormedSecret(apiKey, vault.PrefixAgentKey) {
		return nil, RateDecision{}, ErrUnauthorized
	}
	key := &agentKey{s: s, hash: vault.HashSecret(apiKey)}
	sub, dec, err := s.rates.agents.AllowCredential(ctx, key)
	if err != nil {
		return nil, RateDecision{}, err
	}
	return key.agent, dec, agentRateRefusal(dec, nil, sub.Class)
}

// agentKey is an API key as the rate limiter reads it (a
// ratelimit.Credential): through the authentication cache, or in the
// limiter's reservation statement (agentKeySource). agent is the agent it
// read.
type agentKey struct {
	s     *Service
	hash  []byte
	agent *ent.Agent
}

func (k *agentKey) Hint() string   { return string(k.hash) }
func (k *agentKey) Unknown() error { return ErrUnauthorized }

func (k *agentKey) Authenticate(ctx context.Context) (ratelimit.Subject[uuid.UUID], error) {
	a, err := k.s.authenticateAgent(ctx, k.hash)
	if err != nil {
		return ratelimit.Subject[uuid.UUID]{}, err
	}
	k.agent = a
	return agentRateSubject(a), nil
}

func (k *agentKey) Read(ctx context.Context, query string, args []any, counts []sql.NullInt64) (ratelimit.Subject[uuid.UUID], error) {
	args[0] = k.hash
	read := k.s.agentAuth.Begin()
	rows, err := k.s.cfg.DB.QueryCached(ctx, query, args...)
	if err != nil {
		return ratelimit.Subject[uuid.UUID]{}, err
	}
	a, err := scanAuthRows(rows, counts)
	if err != nil {
		return ratelimit.Subject[uuid.UUID]{}, err
	}
	if a == nil {
		return ratelimit.Subject[uuid.UUID]{}, ErrUnauthorized
	}
	k.s.agentAuth.Put(read, string(k.hash), a)
	k.agent = a
	return agentRateSubject(a), nil
}

// authAgentColumns and authWalletColumns are what Authenticate reads of the
// agent and of each of its wallets, in scanAuthRows order.
var (
	authAgentColumns = []string{
		agent.FieldID, agent.FieldCreatedAt, agent.FieldUpdatedAt, agent.FieldUsername, agent.FieldAPIKeyHash,
		agent.FieldInviteCode, agent.FieldTrustScore, agent.FieldTier, agent.FieldPrimaryWalletID,
		agent.FieldPartnerVerified, agent.FieldPartnerProvider, agent.FieldPartnerSubject, agent.FieldHumanVerified,
		agent.FieldExternalWalletVerified, agent.FieldTxCount, agent.FieldVolumeSent, agent.FieldVolumeReceived,
		agent.FieldFeesPaid, agent.FieldAPIKeyRotatedAt,
	}
	authWalletColumns = []string{
		wallet.FieldID, wallet.FieldCreatedAt, wallet.FieldUpdatedAt, wallet.FieldAgentID, wallet.FieldChain,
		wallet.FieldAddress, wallet.FieldEncryptedKey, wallet.FieldKind, wallet.FieldVerified, wallet.FieldUserID,
	}

	// authColumns are both, as the statements reading a key answer them:
	// agents a, wallets w.
	authColumns = append(qualified("a.", authAgentColumns), qualified("w.", authWalletColumns)...)

	authSQLite   = authSQL("?")
	authPostgres = authSQL("$1")

	// agentKeySource is how the rate limiter's reservation statement reads
	// the key's agent (a) and its wallets, answering authColumns as authSQL
	// does.
	agentKeySource = ratelimit.Source{
		Subject: "SELECT " + strings.Join(authAgentColumns, ", ") + " FROM agents WHERE api_key_hash = $1",
		Columns: authColumns,
		Join:    "LEFT JOIN wallets w ON w.agent_id = a.id",
	}
)

func qualified(prefix string, columns []string) []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = prefix + c
	}
	return out
}

// authSQL reads the agent whose api_key_hash is the parameter, joined with
// its wallets: one row per wallet (wallet columns NULL when it has none).
func authSQL(param string) string {
	return "SELECT " + strings.Join(authColumns, ", ") +
		" FROM agents a LEFT JOIN wallets w ON w.agent_id = a.id WHERE a.api_key_hash = " + param
}

// scanAuthRows reads the rows of authSQL, or of the rate limiter's
// reservation by key (then with len(ints) integers, maybe NULL, after
// authColumns) and closes them. No row is a nil agent.
func scanAuthRows(rows *sql.Rows, ints []sql.NullInt64) (*ent.Agent, error) {
	defer rows.Close()
	var (
		a                                                *ent.Agent
		ag                                               ent.Agent
		primID                                           sql.Null[uuid.UUID]
		tier, username, invite, partnerProv, partnerSubj sql.NullString
		created, updated, rotated                        sql.NullTime
		trust, txCount, volSent, volRecv, fees           sql.NullInt64
		partnerV, humanV, extV                           sql.NullBool

		wID, wAgent, wUser      sql.Null[uuid.UUID]
		wCreated, wUpdated      sql.NullTime
		wChain, wAddress, wKind sql.NullString
		wKey                    []byte
		wVerified               sql.NullBool
	)
	dest := []any{
		&ag.ID, &created, &updated, &username, &ag.APIKeyHash,
		&invite, &trust, &tier, &primID,
		&partnerV, &partnerProv, &partnerSubj, &humanV,
		&extV, &txCount, &volSent, &volRecv,
		&fees, &rotated,
		&wID, &wCreated, &wUpdated, &wAgent, &wChain,
		&wAddress, &wKey, &wKind, &wVerified, &wUser,
	}
	for i := range ints {
		dest = append(dest, &ints[i])
	}
	for rows.Next() {
		wKey = nil
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if a == nil {
			ag.CreatedAt, ag.UpdatedAt = created.Time, updated.Time
			ag.Username, ag.InviteCode, ag.Tier = username.String, invite.String, agent.Tier(tier.String)
			ag.TrustScore = int(trust.Int64)
			if primID.Valid {
				id := primID.V
				ag.PrimaryWalletID = &id
			}
			ag.PartnerVerified, ag.HumanVerified, ag.ExternalWalletVerified = partnerV.Bool, humanV.Bool, extV.Bool
			ag.PartnerProvider, ag.PartnerSubject = partnerProv.String, partnerSubj.String
			ag.TxCount, ag.VolumeSent, ag.VolumeReceived, ag.FeesPaid = txCount.Int64, volSent.Int64, volRecv.Int64, fees.Int64
			if rotated.Valid {
				t := rotated.Time
				ag.APIKeyRotatedAt = &t
			}
			ag.Edges.Wallets = []*ent.Wallet{}
			a = &ag
		}
		if wID.Valid {
			w := &ent.Wallet{
				ID: wID.V, CreatedAt: wCreated.Time, UpdatedAt: wUpdated.Time, AgentID: wAgent.V,
				Chain: wChain.String, Address: wAddress.String, EncryptedKey: wKey,
				Kind: wallet.Kind(wKind.String), Verified: wVerified.Bool,
			}
			if wUser.Valid { // never for an agent's wallet; read so the rows match ent's
				id := wUser.V
				w.UserID = &id
			}
			a.Edges.Wallets = append(a.Edges.Wallets, w)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if a != nil {
		sortWallets(a.Edges.Wallets)
	}
	return a, nil
}

// MerchantAuth is an authenticated merchant and the mode of the key used:
// live keys see live sessions, test keys test sessions.
type MerchantAuth struct {
	Merchant *ent.Merchant
	Mode     Mode
	// keyMatch picks the unrevoked key the request authenticated with.
	keyMatch predicate.MerchantKey
	// Dashboard is the member behind a dashboard session
	// (AuthenticateDashboard); nil for a secret key.
	Dashboard *DashboardCaller
}

// Livemode reports whether the caller uses live keys.
func (a *MerchantAuth) Livemode() bool { return a.Mode == ModeLive }

// keyMode tells the mode of a well-formed key of one of the two prefixes.
func keyMode(k, livePrefix, testPrefix string) (Mode, bool) {
	switch {
	case vault.WellFormedSecret(k, livePrefix):
		return ModeLive, true
	case vault.WellFormedSecret(k, testPrefix):
		return ModeTest, true
	}
	return "", false
}

// AuthenticateMerchant resolves a secret key (X-Checkout-Secret-Key) to its
// merchant and mode. A missing, malformed, unknown or rolled key is
// ErrUnauthorized; a deactivated merchant's key is ErrForbidden. It is one
// lookup by the unique hash index, through the authentication cache; a key
// roll or a deactivation answers only once it holds on every instance.
func (s *Service) AuthenticateMerchant(ctx context.Context, secretKey string) (*MerchantAuth, error) {
	mode, ok := keyMode(secretKey, vault.PrefixSecretLive, vault.PrefixSecretTest)
	if !ok {
		return nil, ErrUnauthorized
	}
	hash := vault.HashSecret(secretKey)
	return s.cachedMerchantByKey(ctx, "s"+string(hash), mode, merchantkey.SecretKeyHash(hash))
}

// MerchantByPublicKey resolves a public key (X-Checkout-Public-Key, the
// checkout page) to its merchant and mode, with the rules of
// AuthenticateMerchant.
func (s *Service) MerchantByPublicKey(ctx context.Context, publicKey string) (*MerchantAuth, error) {
	mode, ok := keyMode(publicKey, vault.PrefixPublicLive, vault.PrefixPublicTest)
	if !ok {
		return nil, ErrUnauthorized
	}
	return s.cachedMerchantByKey(ctx, "p"+publicKey, mode, merchantkey.PublicKey(publicKey))
}

// cachedMerchantByKey is merchantByKey through the authentication cache,
// under cacheKey.
func (s *Service) cachedMerchantByKey(ctx context.Context, cacheKey string, mode Mode, match predicate.MerchantKey) (*MerchantAuth, error) {
	if a, ok := s.merchantAuth.Get(cacheKey); ok {
		return a, nil
	}
	read := s.merchantAuth.Begin()
	a, err := s.merchantByKey(ctx, mode, match)
	if err != nil {
		return nil, err
	}
	s.merchantAuth.Put(read, cacheKey, a)
	return a, nil
}

// merchantByKey is one round trip: the merchant whose unrevoked key of
// this mode matches (the mode is the key's prefix, and a key is stored
// under its own mode's kind).
func (s *Service) merchantByKey(ctx context.Context, mode Mode, match predicate.MerchantKey) (*MerchantAuth, error) {
	keyMatch := merchantkey.And(match, merchantkey.RevokedAtIsNil(), merchantkey.KindEQ(merchantkey.Kind(mode)))
	m, err := s.cfg.DB.Ent.Merchant.Query().
		Where(merchant.HasKeysWith(keyMatch)).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("authenticating merchant: %w", err)
	}
	if !m.Active {
		return nil, errMerchantDeactivated
	}
	return &MerchantAuth{Merchant: m, Mode: mode, keyMatch: keyMatch}, nil
}

// The authentication caches (internal/authcache): what a key authenticated,
// trusted for AuthCacheTTL; which committed rows change which owner.

// DefaultAuthCacheTTL is how long what a key authenticated is trusted
// without reading it again.
const DefaultAuthCacheTTL = 500 * time.Millisecond

// newAgentAuthCache caches agents (with their wallets) by API key hash.
func newAgentAuthCache(ttl time.Duration, clk clock.Clock) *authcache.Cache[*ent.Agent] {
	return authcache.New(ttl, clk, func(a *ent.Agent) uuid.UUID { return a.ID }, copyAgent)
}

// newMerchantAuthCache caches merchants by key ("s" + secret key hash, or
// "p" + public key).
func newMerchantAuthCache(ttl time.Duration, clk clock.Clock) *authcache.Cache[*MerchantAuth] {
	return authcache.New(ttl, clk, func(a *MerchantAuth) uuid.UUID { return a.Merchant.ID }, func(a *MerchantAuth) *MerchantAuth {
		out := *a
		m := *a.Merchant
		m.AcceptedTokens = slices.Clone(m.AcceptedTokens)
		out.Merchant = &m
		if a.Dashboard != nil {
			d := *a.Dashboard
			out.Dashboard = &d
		}
		return &out
	})
}

// copyAgent copies the agent and its wallets, so that callers may change
// what they get without touching the cache.
func copyAgent(a *ent.Agent) *ent.Agent {
	out := *a
	if a.Edges.Wallets != nil {
		out.Edges.Wallets = make([]*ent.Wallet, len(a.Edges.Wallets))
		for i, w := range a.Edges.Wallets {
			wc := *w
			out.Edges.Wallets[i] = &wc
		}
	}
	return &out
}

// agentChangeOf: mutations of agents and their wallets change agents.
func agentChangeOf(m ent.Mutation) (uuid.UUID, bool) {
	switch m := m.(type) {
	case *ent.AgentMutation:
		return authcache.OwnerRowChange(m)
	case *ent.WalletMutation:
		return authcache.HeldRowChange(m.Op(), m.AgentID)
	}
	return uuid.Nil, false
}

// merchantChangeOf: mutations of merchants and their keys change merchants.
func merchantChangeOf(m ent.Mutation) (uuid.UUID, bool) {
	switch m := m.(type) {
	case *ent.MerchantMutation:
		return authcache.OwnerRowChange(m)
	case *ent.MerchantKeyMutation:
		return authcache.HeldRowChange(m.Op(), m.MerchantID)
	}
	return uuid.Nil, false
}
