package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/wallet"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// Username rules (spec 2.1).
const (
	UsernameMinLen = 3
	UsernameMaxLen = 30
)

// ValidateUsername checks the username rules of spec 2.1, each with its own
// message: 3 to 30 characters; lowercase letters, digits and underscore
// only; not starting or ending with an underscore.
func ValidateUsername(username string) error {
	n := len([]rune(username))
	switch {
	case username == "":
		return Invalid("username", "is required")
	case n < UsernameMinLen:
		return Invalid("username", "must be at least %d characters long", UsernameMinLen)
	case n > UsernameMaxLen:
		return Invalid("username", "must be at most %d characters long", UsernameMaxLen)
	}
	for _, r := range username {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return Invalid("username", "may contain only lowercase letters a-z, digits 0-9 and underscore")
		}
	}
	if strings.HasPrefix(username, "_") {
		return Invalid("username", "must not start with an underscore")
	}
	if strings.HasSuffix(username, "_") {
		return Invalid("username", "must not end with an underscore")
	}
	return nil
}

// Registration is a newly created agent, with the API key shown this once.
type Registration struct {
	Agent *ent.Agent
	// APIKey is the plain key; only its hash is stored.
	APIKey string
	// Wallets are the custodial wallets: solana (the primary) then base.
	Wallets []*ent.Wallet
	// External is the verified external wallet of an advanced registration.
	External  *ent.Wallet
	InviteURL string
	Message   string
	// Endpoints maps the spec's short names to "METHOD /path" or a link.
	Endpoints map[string]string
}

// PrimaryWallet returns the primary (Solana) wallet of the registration.
func (r *Registration) PrimaryWallet() *ent.Wallet {
	for _, w := range r.Wallets {
		if IsPrimaryWallet(r.Agent, w) {
			return w
		}
	}
	return r.Wallets[0]
}

// AgentProfile is an agent with its wallets, as its profile shows it.
type AgentProfile struct {
	Agent   *ent.Agent
	Wallets AgentWallets
	// Trust is the breakdown of the agent's trust score.
	Trust     TrustBreakdown
	InviteURL string
}

// externalWallet is an external wallet whose control was proven (EIP-712),
// recorded with the agent at registration.
type externalWallet struct {
	Address, Chain string
}

// QuickRegister creates an agent with a username alone: an API key, a
// Solana wallet (primary) and a Base wallet.
func (s *Service) QuickRegister(ctx context.Context, username string) (*Registration, error) {
	return s.createAgent(ctx, username, nil)
}

// createAgent creates the agent, its custodial Solana and Base wallets and,
// when external is set, a verified external wallet row (which sets
// external_wallet_verified and the trust score), all in one transaction
// (joining the caller's WithTx, if any). A taken username is ErrConflict,
// also when two registrations race for it.
func (s *Service) createAgent(ctx context.Context, username string, external *externalWallet) (*Registration, error) {
	if err := ValidateUsername(username); err != nil {
		return nil, err
	}
	joined := store.InTx(ctx)
	for attempt := 1; ; attempt++ {
		reg, err := s.tryCreateAgent(ctx, username, external)
		if err == nil {
			return reg, nil
		}
		switch {
		case isUniqueViolation(err, "agents_username_key", "agents.username"):
			return nil, usernameTakenError(username)
		case isUniqueViolation(err, "wallet_chain_address", "wallets.chain, wallets.address"):
			return nil, fmt.Errorf("%w: wallet is already held by another agent", ErrConflict)
		case isUniqueViolation(err, "agents_invite_code_key", "agents.invite_code") && !joined && attempt < 3:
			continue // a 1 in 36^10 collision of random invite codes: draw again
		}
		return nil, err
	}
}

// isUniqueViolation tells which unique index a constraint error broke:
// PostgreSQL names the index, SQLite the columns.
func isUniqueViolation(err error, pgIndex, sqliteColumns string) bool {
	if !ent.IsConstraintError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, `"`+pgIndex+`"`) || strings.Contains(msg, "UNIQUE constraint failed: "+sqliteColumns)
}

func (s *Service) tryCreateAgent(ctx context.Context, username string, external *externalWallet) (*Registration, error) {
	// Keys are generated and sealed before the transaction, which then only
	// writes (custodialWallet).
	apiKey, apiKeyHash, err := vault.NewSecret(vault.PrefixAgentKey)
	if err != nil {
		return nil, err
	}
	inviteCode := vault.InviteCode.New()
	custodials, err := s.newCustodialWallets()
	if err != nil {
		return nil, err
	}

	reg := &Registration{APIKey: apiKey}
	now := s.now().UTC()
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		// Agents and users share the namespace (human_usernames.go); among
		// agents the unique index also decides races (see createAgent).
		if err := s.claimUsername(ctx, tx, sqlTx, username); err != nil {
			return err
		}
		a, err := tx.Agent.Create().
			SetUsername(username).
			SetAPIKeyHash(apiKeyHash).
			SetInviteCode(inviteCode).
			SetExternalWalletVerified(external != nil).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Save(ctx)
		if err != nil {
			return err
		}
		builders := make([]*ent.WalletCreate, 0, 3)
		for _, c := range custodials {
			builders = append(builders, c.create(tx, now).SetAgentID(a.ID))
		}
		if external != nil {
			builders = append(builders, tx.Wallet.Create().
				SetAgentID(a.ID).
				SetChain(external.Chain).
				SetAddress(external.Address).
				SetKind(wallet.KindExternal).
				SetVerified(true).
				SetCreatedAt(now).
				SetUpdatedAt(now))
		}
		wallets, err := tx.Wallet.CreateBulk(builders...).Save(ctx)
		if err != nil {
			return err
		}
		reg.Wallets = wallets[:len(custodials)]
		if external != nil {
			reg.External = wallets[len(custodials)]
		}
		a, err = a.Update().SetPrimaryWalletID(custodials[0].id).Save(ctx)
		if err != nil {
			return err
		}
		reg.Agent, err = s.storeTrust(ctx, tx.Client(), a)
		return err
	})
	if err != nil {
		return nil, err
	}
	reg.InviteURL = s.inviteURL(reg.Agent.InviteCode)
	reg.Endpoints = s.agentEndpoints()
	reg.Message = fmt.Sprintf("Welcome, %s! Your agent is registered with a Solana wallet (%s, primary) and a Base wallet (%s). "+
		"Save your API key now: it is shown only once. Send it in the X-Agent-Key header to use the endpoints listed here. "+
		"Fund a wallet by sending USDC to its address; share %s to invite a human.",
		username, reg.Wallets[0].Address, reg.Wallets[1].Address, reg.InviteURL)
	return reg, nil
}

// custodialWallet is a new custodial wallet's key, made and sealed before
// the transaction that records it, which then only writes. Its id is chosen
// first: it is the associated data of the sealed key, so a ciphertext
// copied to another row does not open.
type custodialWallet struct {
	id        uuid.UUID
	chain     chains.Name
	address   string
	encrypted []byte
}

// newCustodialWallets makes the custodial wallets every agent and human
// user holds: solana (an agent's primary) then base.
func (s *Service) newCustodialWallets() ([]*custodialWallet, error) {
	var out []*custodialWallet
	for _, chain := range []chains.Name{chains.Solana, chains.Base} {
		c := &custodialWallet{id: uuid.New(), chain: chain}
		key, addr, err := s.wallets(chain).NewKey()
		if err != nil {
			return nil, err
		}
		c.address = addr
		c.encrypted, err = s.cfg.Vault.Seal(key, c.id[:])
		clear(key)
		if err != nil {
			return nil, fmt.Errorf("sealing %s wallet key: %w", chain, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// create is the wallet's row, its owner still to be set.
func (c *custodialWallet) create(tx *ent.Tx, now time.Time) *ent.WalletCreate {
	return tx.Wallet.Create().
		SetID(c.id).
		SetChain(string(c.chain)).
		SetAddress(c.address).
		SetEncryptedKey(c.encrypted).
		SetKind(wallet.KindCustodial).
		SetVerified(true).
		SetCreatedAt(now).
		SetUpdatedAt(now)
}

func (s *Service) inviteURL(code string) string {
	return strings.TrimRight(s.cfg.AppURL, "/") + "/invite/" + code
}

// agentEndpoints is the endpoints map of the registration object (spec 2.1).
func (s *Service) agentEndpoints() map[string]string {
	return map[string]string{
		"profile":         "GET /agents/me/profile",
		"balance":         "GET /agents/me/wallet/balance",
		"send":            "POST /agents/me/wallet/send",
		"send_to_user":    "POST /agents/me/wallet/send-to-user",
		"invite_human":    "POST /agents/me/invite-human",
		"pair_with_human": "POST /agents/me/pairings/request",
		"docs":            strings.TrimRight(s.cfg.BaseURL, "/") + "/openapi.json",
	}
}

// walletKey opens the sealed private key of a custodial wallet. The caller
// must clear it after use and never log it.
func (s *Service) walletKey(_ context.Context, w *ent.Wallet) ([]byte, error) {
	if w.Kind != wallet.KindCustodial || len(w.EncryptedKey) == 0 {
		return nil, fmt.Errorf("wallet %s has no custodial key", w.ID)
	}
	key, err := s.cfg.Vault.Open(w.EncryptedKey, w.ID[:])
	if err != nil {
		return nil, fmt.Errorf("opening key of wallet %s: %w", w.ID, err)
	}
	return key, nil
}

// RegeneratedKeyMessage accompanies a regenerated API key, on every facade.
const RegeneratedKeyMessage = "Your new API key is shown only this once: store it now. The previous key no longer works."

// RegenerateAPIKey replaces the agent's API key and returns the new one,
// shown this once. The old key stops working everywhere before it answers:
// the hash is replaced in the database, and the answer waits until no
// instance's authentication cache can still hold the old key. Only the
// key the agent authenticated with can be replaced, so of two concurrent
// regenerations with one key, one wins and the other is ErrUnauthorized.
func (s *Service) RegenerateAPIKey(ctx context.Context, a *ent.Agent) (string, error) {
	plain, hash, err := vault.NewSecret(vault.PrefixAgentKey)
	if err != nil {
		return "", err
	}
	// One row by id (the authentication cache drops just this agent), and
	// only while it still has the key the caller authenticated with.
	err = s.cfg.DB.Ent.Agent.UpdateOneID(a.ID).
		Where(agent.APIKeyHash(a.APIKeyHash)).
		SetAPIKeyHash(hash).
		SetAPIKeyRotatedAt(s.now().UTC()).
		Exec(ctx)
	if ent.IsNotFound(err) {
		return "", ErrUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("regenerating API key: %w", err)
	}
	a.APIKeyHash = hash
	// Other instances may serve the old key from their authentication cache
	// until their entry expires: answer once every such entry has, so that
	// the caller never holds the new key while the old one still works.
	s.agentAuth.WaitTTL(ctx)
	return plain, nil
}

// AgentByID returns an agent's public profile; a malformed or unknown id is
// ErrNotFound.
func (s *Service) AgentByID(ctx context.Context, id string) (*AgentProfile, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, errAgentNotFound
	}
	a, err := s.cfg.DB.Ent.Agent.Get(ctx, uid)
	if ent.IsNotFound(err) {
		return nil, errAgentNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	return s.profile(ctx, a)
}

var errAgentNotFound = fmt.Errorf("%w: no such agent", ErrNotFound)

// AgentByUsername returns an agent's public profile, ErrNotFound if there is
// no agent by that name.
func (s *Service) AgentByUsername(ctx context.Context, username string) (*AgentProfile, error) {
	a, err := s.cfg.DB.Ent.Agent.Query().Where(agent.Username(username)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errAgentNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	return s.profile(ctx, a)
}

// Profile returns the authenticated agent's own profile, its trust score
// brought up to date. The wallets are those Authenticate read with the agent
// (Edges.Wallets), in the same request; an agent without them loaded has
// them read here.
func (s *Service) Profile(ctx context.Context, a *ent.Agent) (*AgentProfile, error) {
	return s.profile(ctx, a)
}

func (s *Service) profile(ctx context.Context, a *ent.Agent) (*AgentProfile, error) {
	a, err := s.refreshTrust(ctx, a)
	if err != nil {
		return nil, err
	}
	// Authenticate read the wallets with the agent, in Wallets order.
	wallets := walletsOf(a, a.Edges.Wallets)
	if a.Edges.Wallets == nil {
		if wallets, err = s.Wallets(ctx, a); err != nil {
			return nil, err
		}
	}
	return &AgentProfile{
		Agent:     a,
		Wallets:   wallets,
		Trust:     ComputeTrust(trustInputsOf(a, s.now())),
		InviteURL: s.inviteURL(a.InviteCode),
	}, nil
}

// AgentWallets are an agent's wallets as every answer lists them: custodial
// first (solana, then base), then external wallets in the order they were
// verified; and which of them is primary.
type AgentWallets struct {
	All []*ent.Wallet
	// Primary is the primary wallet (nil only if the agent has none).
	Primary *ent.Wallet
}

// Payable are the wallets anyone may pay the agent at, which its public
// profile lists: the custodial ones (external wallets are the agent's
// own; it sees them in its own profile).
func (ws AgentWallets) Payable() []*ent.Wallet {
	var out []*ent.Wallet
	for _, w := range ws.All {
		if w.Kind == wallet.KindCustodial {
			out = append(out, w)
		}
	}
	return out
}

// IsPrimaryWallet reports whether w is a's primary wallet.
func IsPrimaryWallet(a *ent.Agent, w *ent.Wallet) bool {
	return w.AgentID == a.ID && a.PrimaryWalletID != nil && *a.PrimaryWalletID == w.ID
}

// walletsOf are a's wallets ws, already in Wallets order.
func walletsOf(a *ent.Agent, ws []*ent.Wallet) AgentWallets {
	out := AgentWallets{All: ws}
	for _, w := range ws {
		if IsPrimaryWallet(a, w) {
			out.Primary = w
		}
	}
	return out
}

// Wallets reads the agent's wallets.
func (s *Service) Wallets(ctx context.Context, a *ent.Agent) (AgentWallets, error) {
	ws, err := s.cfg.DB.Ent.Wallet.Query().Where(wallet.AgentID(a.ID)).All(ctx)
	if err != nil {
		return AgentWallets{}, fmt.Errorf("listing wallets: %w", err)
	}
	sortWallets(ws)
	return walletsOf(a, ws), nil
}

// walletChainOrder: the agent chains first, solana before base (the order
// of the registration object), then the other chains in API order.
func walletChainOrder(c string) int {
	switch chains.Name(c) {
	case chains.Solana:
		return 0
	case chains.Base:
		return 1
	}
	return 2 + chainOrder(chains.Name(c))
}

func sortWallets(ws []*ent.Wallet) {
	sort.SliceStable(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if a.Kind != b.Kind {
			return a.Kind == wallet.KindCustodial
		}
		if a.Kind == wallet.KindCustodial || a.CreatedAt.Equal(b.CreatedAt) {
			if oa, ob := walletChainOrder(a.Chain), walletChainOrder(b.Chain); oa != ob {
				return oa < ob
			}
			return a.Address < b.Address
		}
		return a.CreatedAt.Before(b.CreatedAt)
	})
}
