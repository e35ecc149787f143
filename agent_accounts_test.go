package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/wallet"
	"agentpay/internal/vault"
)

func TestValidateUsername(t *testing.T) {
	tests := []struct {
		username string
		err      string // "" = valid
	}{
		{"abc", ""},
		{strings.Repeat("a", 30), ""},
		{"agent_007", ""},
		{"a_b", ""},
		{"007", ""},
		{"", "username: is required"},
		{"ab", "username: must be at least 3 characters long"},
		{strings.Repeat("a", 31), "username: must be at most 30 characters long"},
		{"Alice", "username: may contain only lowercase letters a-z, digits 0-9 and underscore"},
		{"al-ice", "username: may contain only lowercase letters a-z, digits 0-9 and underscore"},
		{"al ice", "username: may contain only lowercase letters a-z, digits 0-9 and underscore"},
		{"émile", "username: may contain only lowercase letters a-z, digits 0-9 and underscore"},
		{"_alice", "username: must not start with an underscore"},
		{"alice_", "username: must not end with an underscore"},
		{"___", "username: must not start with an underscore"},
	}
	for _, tt := range tests {
		t.Run(tt.username, func(t *testing.T) {
			err := ValidateUsername(tt.username)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, IsValidation(err), "%v", err)
			require.EqualError(t, err, tt.err)
		})
	}
}

func TestQuickRegister(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})

	reg, err := svc.QuickRegister(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "alice", reg.Agent.Username)
	require.True(t, strings.HasPrefix(reg.APIKey, vault.PrefixAgentKey))
	require.Equal(t, vault.HashSecret(reg.APIKey), reg.Agent.APIKeyHash, "only the hash is stored")
	require.Len(t, reg.Wallets, 2)
	require.Equal(t, "solana", reg.Wallets[0].Chain)
	require.Equal(t, "base", reg.Wallets[1].Chain)
	require.Equal(t, reg.Wallets[0].ID, *reg.Agent.PrimaryWalletID)
	require.Equal(t, reg.Wallets[0], reg.PrimaryWallet())
	require.Regexp(t, `^[a-z0-9]{10}$`, reg.Agent.InviteCode)
	require.Equal(t, "http://app.test/invite/"+reg.Agent.InviteCode, reg.InviteURL)
	require.Equal(t, "http://api.test/openapi.json", reg.Endpoints["docs"])
	require.Equal(t, "GET /agents/me/profile", reg.Endpoints["profile"])
	require.Len(t, reg.Endpoints, 7)
	require.Contains(t, reg.Message, "alice")
	require.NotContains(t, reg.Message, reg.APIKey)
	require.Equal(t, 0, reg.Agent.TrustScore)
	require.Equal(t, agent.TierT0, reg.Agent.Tier)

	// The sealed keys open, for the right row only, and match the addresses.
	for _, w := range reg.Wallets {
		require.Equal(t, wallet.KindCustodial, w.Kind)
		key, err := svc.walletKey(ctx, w)
		require.NoError(t, err)
		addr, err := svc.wallets(chains.Name(w.Chain)).AddressOf(key)
		require.NoError(t, err)
		require.Equal(t, w.Address, addr)
	}
	swapped := *reg.Wallets[0]
	swapped.ID = reg.Wallets[1].ID
	_, err = svc.walletKey(ctx, &swapped)
	require.ErrorIs(t, err, vault.ErrOpen, "a ciphertext does not open under another wallet's id")
	stored := svc.cfg.DB.Ent.Wallet.GetX(ctx, reg.Wallets[0].ID)
	key, err := svc.walletKey(ctx, stored)
	require.NoError(t, err)
	require.NotContains(t, string(stored.EncryptedKey), string(key))

	// Taken.
	_, err = svc.QuickRegister(ctx, "alice")
	require.ErrorIs(t, err, ErrConflict)
	require.EqualError(t, err, `conflict: username "alice" is already taken`)
	// Invalid: nothing written.
	_, err = svc.QuickRegister(ctx, "Bob")
	require.True(t, IsValidation(err))
	require.Equal(t, 1, svc.cfg.DB.Ent.Agent.Query().CountX(ctx))
	require.Equal(t, 2, svc.cfg.DB.Ent.Wallet.Query().CountX(ctx))
}

func TestQuickRegisterRace(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = svc.QuickRegister(ctx, "racer")
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, ErrConflict, "a lost race is a 409, not a 500")
	}
	require.Equal(t, 1, ok)
	require.Equal(t, 2, svc.cfg.DB.Ent.Wallet.Query().CountX(ctx))
}

func TestUniqueViolationTranslated(t *testing.T) {
	// The pre-check cannot see a concurrent insert; the index can. Simulate
	// the race by inserting behind the pre-check's back inside one tx.
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	_, err := svc.QuickRegister(ctx, "taken")
	require.NoError(t, err)
	_, _, err = svc.insertRawAgent(ctx, "taken")
	require.Error(t, err)
	require.True(t, isUniqueViolation(err, "agents_username_key", "agents.username"), "%v", err)
	require.False(t, isUniqueViolation(err, "agents_invite_code_key", "agents.invite_code"), "%v", err)
}

// insertRawAgent inserts a bare agent row, skipping the service's checks.
func (s *Service) insertRawAgent(ctx context.Context, username string) (*ent.Agent, string, error) {
	plain, hash, err := vault.NewSecret(vault.PrefixAgentKey)
	if err != nil {
		return nil, "", err
	}
	code := vault.InviteCode.New()
	a, err := s.cfg.DB.Ent.Agent.Create().SetUsername(username).SetAPIKeyHash(hash).SetInviteCode(code).Save(ctx)
	return a, plain, err
}

func TestCreateAgentWithExternalWallet(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	ext := &externalWallet{Address: "0x52908400098527886E0F7030069857D2E4169EE7", Chain: "base"}
	reg, err := svc.createAgent(ctx, "walleted", ext)
	require.NoError(t, err)
	require.True(t, reg.Agent.ExternalWalletVerified)
	require.Equal(t, TrustExternalWalletPoints, reg.Agent.TrustScore)
	require.Equal(t, agent.TierT0, reg.Agent.Tier)
	require.NotNil(t, reg.External)
	require.Equal(t, wallet.KindExternal, reg.External.Kind)
	require.True(t, reg.External.Verified)
	require.Empty(t, reg.External.EncryptedKey)
	_, err = svc.walletKey(ctx, reg.External)
	require.Error(t, err)

	ws, err := svc.Wallets(ctx, reg.Agent)
	require.NoError(t, err)
	all := ws.All
	require.Equal(t, []string{"solana", "base", "base"}, []string{all[0].Chain, all[1].Chain, all[2].Chain})
	require.Equal(t, wallet.KindExternal, all[2].Kind)
	require.Equal(t, all[0], ws.Primary, "the solana wallet is primary")
	require.True(t, IsPrimaryWallet(reg.Agent, all[0]))
	require.False(t, IsPrimaryWallet(reg.Agent, all[2]))
	require.Equal(t, all[:2], ws.Payable(), "an agent is paid at its custodial wallets only")

	// The same external wallet for another agent: 409, and nothing of
	// that agent remains.
	_, err = svc.createAgent(ctx, "second", ext)
	require.ErrorIs(t, err, ErrConflict)
	require.False(t, svc.cfg.DB.Ent.Agent.Query().Where(agent.Username("second")).ExistX(ctx))

	// Inside a caller's transaction (advanced register), a failure rolls
	// back with it.
	err = svc.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		if _, err := svc.createAgent(ctx, "third", nil); err != nil {
			return err
		}
		return fmt.Errorf("challenge refused")
	})
	require.EqualError(t, err, "challenge refused")
	require.False(t, svc.cfg.DB.Ent.Agent.Query().Where(agent.Username("third")).ExistX(ctx))
}

func TestAuthenticateAndRegenerate(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	reg, err := svc.QuickRegister(ctx, "keyholder")
	require.NoError(t, err)

	a, err := svc.Authenticate(ctx, reg.APIKey)
	require.NoError(t, err)
	require.Equal(t, reg.Agent.ID, a.ID)

	other, _, err := vault.NewSecret(vault.PrefixAgentKey)
	require.NoError(t, err)
	for name, key := range map[string]string{
		"missing":           "",
		"no prefix":         strings.TrimPrefix(reg.APIKey, vault.PrefixAgentKey),
		"merchant prefix":   "sk_live_" + strings.TrimPrefix(reg.APIKey, vault.PrefixAgentKey),
		"truncated":         reg.APIKey[:len(reg.APIKey)-1],
		"extended":          reg.APIKey + "A",
		"bad character":     reg.APIKey[:len(reg.APIKey)-1] + "-",
		"surrounding space": " " + reg.APIKey,
		"unknown":           other,
	} {
		_, err := svc.Authenticate(ctx, key)
		require.ErrorIs(t, err, ErrUnauthorized, name)
	}

	newKey, err := svc.RegenerateAPIKey(ctx, a)
	require.NoError(t, err)
	require.NotEqual(t, reg.APIKey, newKey)
	_, err = svc.Authenticate(ctx, reg.APIKey)
	require.ErrorIs(t, err, ErrUnauthorized, "the old key stops at once")
	b, err := svc.Authenticate(ctx, newKey)
	require.NoError(t, err)
	require.NotNil(t, b.APIKeyRotatedAt)

	// A second regeneration with the (now stale) old identity fails.
	_, err = svc.RegenerateAPIKey(ctx, reg.Agent)
	require.ErrorIs(t, err, ErrUnauthorized)
	_, err = svc.Authenticate(ctx, newKey)
	require.NoError(t, err)
}

func TestAgentLookups(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	reg, err := svc.QuickRegister(ctx, "lookup")
	require.NoError(t, err)

	p, err := svc.AgentByID(ctx, reg.Agent.ID.String())
	require.NoError(t, err)
	require.Equal(t, "lookup", p.Agent.Username)
	require.Equal(t, reg.Wallets[0].ID, p.Wallets.Primary.ID)
	require.Len(t, p.Wallets.All, 2)

	p, err = svc.AgentByUsername(ctx, "lookup")
	require.NoError(t, err)
	require.Equal(t, reg.Agent.ID, p.Agent.ID)

	for _, id := range []string{"nope", "", reg.Wallets[0].ID.String()} {
		_, err = svc.AgentByID(ctx, id)
		require.ErrorIs(t, err, ErrNotFound, id)
	}
	_, err = svc.AgentByUsername(ctx, "nobody")
	require.ErrorIs(t, err, ErrNotFound)

	free, err := svc.CheckUsername(ctx, "lookup")
	require.NoError(t, err)
	require.False(t, free)
	free, err = svc.CheckUsername(ctx, "lookup2")
	require.NoError(t, err)
	require.True(t, free)
	_, err = svc.CheckUsername(ctx, "x")
	require.True(t, IsValidation(err))
}
