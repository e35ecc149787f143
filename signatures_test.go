package agentpay

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/wallet"
	"agentpay/internal/clock"
	"agentpay/internal/vault"
)

// typedData decodes m's typed data as a wallet does.
func typedData(t *testing.T, m *SignatureMessage) apitypes.TypedData {
	t.Helper()
	var td apitypes.TypedData
	require.NoError(t, json.Unmarshal(m.TypedData, &td))
	return td
}

// signTypedData signs m's typed data as a wallet's eth_signTypedData_v4
// does (v 27/28): the JSON the service answers is exactly what gets signed.
func signTypedData(t *testing.T, key *ecdsa.PrivateKey, m *SignatureMessage) string {
	t.Helper()
	hash, _, err := apitypes.TypedDataAndHash(typedData(t, m))
	require.NoError(t, err)
	sig, err := crypto.Sign(hash, key)
	require.NoError(t, err)
	sig[64] += 27
	return "0x" + hex.EncodeToString(sig)
}

// testRequester asks for the messages of the tests that are not about who
// asks; their submissions name no requester, so they are found among
// anyone's messages.
const testRequester = "203.0.113.1"

func newEVMKey(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	return key, crypto.PubkeyToAddress(key.PublicKey).Hex()
}

func TestSignatureMessage(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 500, time.UTC)
	svc := newTestService(t, nil, Config{AgentMode: ModeTest, Clock: clock.NewStub(now)})
	_, addr := newEVMKey(t)

	m, err := svc.SignatureMessage(ctx, testRequester, "alice_1", addr)
	require.NoError(t, err)
	require.Equal(t, PurposeRegister, m.Purpose)
	td := typedData(t, m)
	require.Equal(t, PrimaryTypeRegistration, td.PrimaryType)
	require.Equal(t, int64(ChainIDBaseSepolia), m.ChainID)
	require.Equal(t, now.Truncate(time.Second), m.IssuedAt)
	require.Equal(t, now.Truncate(time.Second).Add(SignatureChallengeTTL), m.ExpiresAt)
	require.Regexp(t, `^0x[0-9a-f]{64}$`, m.Nonce)
	require.Equal(t, addr, td.Message["wallet"])
	require.Equal(t, m.ExpiresAt.Format(time.RFC3339), td.Message["expiresAt"])
	require.Equal(t, int64(ChainIDBaseSepolia), (*big.Int)(td.Domain.ChainId).Int64())
	require.Contains(t, m.Text, m.Nonce)

	// A lowercase address is accepted and stored checksummed.
	m2, err := svc.SignatureMessage(ctx, testRequester, "alice_1", toLower(addr))
	require.NoError(t, err)
	require.Equal(t, addr, m2.Wallet)
	require.NotEqual(t, m.Nonce, m2.Nonce)

	// The username of an existing agent gets a wallet verification message.
	createBareAgent(t, svc, "bob_1")
	m3, err := svc.SignatureMessage(ctx, testRequester, "bob_1", addr)
	require.NoError(t, err)
	require.Equal(t, PurposeVerifyWallet, m3.Purpose)
	require.Equal(t, PrimaryTypeWalletVerification, typedData(t, m3).PrimaryType)

	for _, tt := range []struct {
		name, username, wallet, field string
	}{
		{"bad username", "A", addr, "username"},
		{"bad address", "alice_1", "0x1234", "wallet_address"},
		{"bad checksum", "alice_1", "0x" + flipCase(addr[2:]), "wallet_address"},
		{"zero address", "alice_1", "0x0000000000000000000000000000000000000000", "wallet_address"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.SignatureMessage(ctx, testRequester, tt.username, tt.wallet)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tt.field, verr.Field)
		})
	}
}

func TestRegisterEIP712(t *testing.T) {
	ctx := context.Background()

	type setup struct {
		svc  *Service
		key  *ecdsa.PrivateKey
		addr string
		msg  *SignatureMessage
	}
	for _, tt := range []struct {
		name string
		// req builds the request from a fresh message signed by key.
		req func(t *testing.T, s setup) RegisterRequest
		// later is how far the clock moves between the message and the
		// registration.
		later   time.Duration
		wantErr string // "" = success; else the detail's substring
		conflct bool
	}{
		{name: "ok", req: func(t *testing.T, s setup) RegisterRequest {
			return RegisterRequest{Username: "alice_1", WalletAddress: s.addr, Signature: signTypedData(t, s.key, s.msg), SignatureType: "eip712"}
		}},
		{name: "lowercase address and v 0/1", req: func(t *testing.T, s setup) RegisterRequest {
			sig := signTypedData(t, s.key, s.msg)
			b, _ := hex.DecodeString(sig[2:])
			b[64] -= 27
			return RegisterRequest{Username: "alice_1", WalletAddress: toLower(s.addr), Signature: hex.EncodeToString(b), SignatureType: "eip712"}
		}},
		{name: "wrong signer", wantErr: "does not recover to wallet_address", req: func(t *testing.T, s setup) RegisterRequest {
			other, _ := newEVMKey(t)
			return RegisterRequest{Username: "alice_1", WalletAddress: s.addr, Signature: signTypedData(t, other, s.msg), SignatureType: "eip712"}
		}},
		{name: "tampered message", wantErr: "does not recover to wallet_address", req: func(t *testing.T, s setup) RegisterRequest {
			expiresAt := `"expiresAt":"` + s.msg.ExpiresAt.Format(time.RFC3339) + `"`
			require.Contains(t, string(s.msg.TypedData), expiresAt)
			s.msg.TypedData = json.RawMessage(strings.Replace(string(s.msg.TypedData), expiresAt, `"expiresAt":"2099-01-01T00:00:00Z"`, 1))
			return RegisterRequest{Username: "alice_1", WalletAddress: s.addr, Signature: signTypedData(t, s.key, s.msg), SignatureType: "eip712"}
		}},
		{name: "other username", wantErr: "no message was issued", req: func(t *testing.T, s setup) RegisterRequest {
			return RegisterRequest{Username: "mallory", WalletAddress: s.addr, Signature: signTypedData(t, s.key, s.msg), SignatureType: "eip712"}
		}},
		{name: "expired", wantErr: "expired at", later: SignatureChallengeTTL + time.Second, req: func(t *testing.T, s setup) RegisterRequest {
			return RegisterRequest{Username: "alice_1", WalletAddress: s.addr, Signature: signTypedData(t, s.key, s.msg), SignatureType: "eip712"}
		}},
		{name: "wrong signature type", wantErr: "signature_type: must be eip712", req: func(t *testing.T, s setup) RegisterRequest {
			return RegisterRequest{Username: "alice_1", WalletAddress: s.addr, Signature: signTypedData(t, s.key, s.msg), SignatureType: "personal_sign"}
		}},
		{name: "malformed signature", wantErr: "65-byte signature", req: func(t *testing.T, s setup) RegisterRequest {
			return RegisterRequest{Username: "alice_1", WalletAddress: s.addr, Signature: "0xdeadbeef", SignatureType: "eip712"}
		}},
		{name: "bad v", wantErr: "65-byte signature", req: func(t *testing.T, s setup) RegisterRequest {
			sig := signTypedData(t, s.key, s.msg)
			return RegisterRequest{Username: "alice_1", WalletAddress: s.addr, Signature: sig[:130] + "1d", SignatureType: "eip712"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewStub(time.Now())
			svc := newTestService(t, nil, Config{AgentMode: ModeTest, Clock: clk})
			key, addr := newEVMKey(t)
			msg, err := svc.SignatureMessage(ctx, testRequester, "alice_1", addr)
			require.NoError(t, err)
			req := tt.req(t, setup{svc, key, addr, msg})
			clk.Advance(tt.later)
			_, err = svc.Register(ctx, req)
			if tt.wantErr != "" {
				require.True(t, IsValidation(err), "%v", err)
				require.ErrorContains(t, err, tt.wantErr)
				require.Zero(t, svc.cfg.DB.Ent.Agent.Query().CountX(ctx), "a refused registration changes nothing")
				require.Nil(t, svc.cfg.DB.Ent.SignatureChallenge.Query().OnlyX(ctx).UsedAt)
				return
			}
			require.NoError(t, err)
			a := svc.cfg.DB.Ent.Agent.Query().OnlyX(ctx)
			require.Equal(t, "alice_1", a.Username)
			ext := svc.cfg.DB.Ent.Wallet.Query().Where(wallet.KindEQ(wallet.KindExternal)).OnlyX(ctx)
			require.Equal(t, addr, ext.Address)
			require.Equal(t, "base", ext.Chain)
			require.True(t, ext.Verified)
			require.Equal(t, a.ID, ext.AgentID)
			require.NotNil(t, svc.cfg.DB.Ent.SignatureChallenge.Query().OnlyX(ctx).UsedAt)

			// Replaying the same signed message is refused as such.
			_, err = svc.Register(ctx, req)
			require.True(t, IsValidation(err), "%v", err)
			require.ErrorContains(t, err, "already used")
		})
	}
}

func TestRegisterEIP712Conflicts(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{AgentMode: ModeTest})
	key, addr := newEVMKey(t)

	// Two outstanding messages: the older one is still accepted.
	first, err := svc.SignatureMessage(ctx, testRequester, "alice_1", addr)
	require.NoError(t, err)
	_, err = svc.SignatureMessage(ctx, testRequester, "alice_1", addr)
	require.NoError(t, err)
	_, err = svc.Register(ctx, RegisterRequest{Username: "alice_1", WalletAddress: addr, Signature: signTypedData(t, key, first), SignatureType: "eip712"})
	require.NoError(t, err)

	// The same wallet for another username: 409.
	m, err := svc.SignatureMessage(ctx, testRequester, "alice_2", addr)
	require.NoError(t, err)
	_, err = svc.Register(ctx, RegisterRequest{Username: "alice_2", WalletAddress: addr, Signature: signTypedData(t, key, m), SignatureType: "eip712"})
	require.ErrorIs(t, err, ErrConflict)
	require.ErrorContains(t, err, "already held by another agent")

	// A username taken after its message was issued: 409.
	key2, addr2 := newEVMKey(t)
	m, err = svc.SignatureMessage(ctx, testRequester, "carol", addr2)
	require.NoError(t, err)
	createBareAgent(t, svc, "carol")
	_, err = svc.Register(ctx, RegisterRequest{Username: "carol", WalletAddress: addr2, Signature: signTypedData(t, key2, m), SignatureType: "eip712"})
	require.ErrorIs(t, err, ErrConflict)
	require.ErrorContains(t, err, "taken")
}

func TestVerifyWallet(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{AgentMode: ModeTest})
	alice := createBareAgent(t, svc, "alice_1")
	bob := createBareAgent(t, svc, "bob_1")
	key, addr := newEVMKey(t)

	m, err := svc.SignatureMessage(ctx, testRequester, "alice_1", addr)
	require.NoError(t, err)
	require.Equal(t, PurposeVerifyWallet, m.Purpose)
	sig := signTypedData(t, key, m)

	// Bob cannot use a message issued for alice.
	_, err = svc.VerifyWallet(ctx, bob, VerifyWalletRequest{WalletAddress: addr, Signature: sig, SignatureType: "eip712"})
	require.ErrorContains(t, err, "no message was issued")

	for _, tt := range []struct {
		name    string
		req     VerifyWalletRequest
		wantErr string
	}{
		{"solana", VerifyWalletRequest{WalletAddress: addr, Signature: sig, SignatureType: "eip712", Chain: "solana"}, "chain: an eip712 signature proves an EVM wallet"},
		{"unknown chain", VerifyWalletRequest{WalletAddress: addr, Signature: sig, SignatureType: "eip712", Chain: "dogecoin"}, "chain:"},
		{"signature type", VerifyWalletRequest{WalletAddress: addr, Signature: sig, SignatureType: "", Chain: "base"}, "signature_type"},
		{"bad address", VerifyWalletRequest{WalletAddress: "nope", Signature: sig, SignatureType: "eip712"}, "wallet_address"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.VerifyWallet(ctx, alice, tt.req)
			require.True(t, IsValidation(err), "%v", err)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}

	w, err := svc.VerifyWallet(ctx, alice, VerifyWalletRequest{WalletAddress: addr, Signature: sig, SignatureType: "eip712", Chain: "arbitrum", SetAsPrimary: true})
	require.NoError(t, err)
	require.Equal(t, addr, w.Address)
	require.Equal(t, "arbitrum", w.Chain)
	require.Equal(t, wallet.KindExternal, w.Kind)
	require.True(t, w.Verified)
	got := svc.cfg.DB.Ent.Agent.GetX(ctx, alice.ID)
	require.True(t, got.ExternalWalletVerified)
	require.Equal(t, w.ID, *got.PrimaryWalletID)
	require.Greater(t, got.TrustScore, 0, "a verified external wallet raises the trust score")

	// Replay: refused.
	_, err = svc.VerifyWallet(ctx, alice, VerifyWalletRequest{WalletAddress: addr, Signature: sig, SignatureType: "eip712", Chain: "arbitrum"})
	require.ErrorContains(t, err, "already used")

	// Bob proving the same wallet: 409, even with his own message.
	m, err = svc.SignatureMessage(ctx, testRequester, "bob_1", addr)
	require.NoError(t, err)
	_, err = svc.VerifyWallet(ctx, bob, VerifyWalletRequest{WalletAddress: addr, Signature: signTypedData(t, key, m), SignatureType: "eip712"})
	require.ErrorIs(t, err, ErrConflict)

	// Alice verifying it again on another chain: recorded, primary unchanged.
	m, err = svc.SignatureMessage(ctx, testRequester, "alice_1", addr)
	require.NoError(t, err)
	w2, err := svc.VerifyWallet(ctx, alice, VerifyWalletRequest{WalletAddress: addr, Signature: signTypedData(t, key, m), SignatureType: "eip712"})
	require.NoError(t, err)
	require.Equal(t, "base", w2.Chain)
	require.Equal(t, w.ID, *svc.cfg.DB.Ent.Agent.GetX(ctx, alice.ID).PrimaryWalletID)
}

// createBareAgent writes an agent row directly (no wallets, no key).
func createBareAgent(t *testing.T, svc *Service, username string) *ent.Agent {
	t.Helper()
	return svc.cfg.DB.Ent.Agent.Create().SetUsername(username).
		SetAPIKeyHash(vault.HashSecret("ak_test_" + username)).SetInviteCode("inv" + username).
		SaveX(context.Background())
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

func flipCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 32
		case c >= 'a' && c <= 'z':
			b[i] = c - 32
		}
	}
	return string(b)
}

// TestRegisterEIP712ConcurrentUse: one signed message used by many requests
// at once registers exactly one agent; the others are refused.
func TestRegisterEIP712ConcurrentUse(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, Config{AgentMode: ModeTest})
	key, addr := newEVMKey(t)
	m, err := svc.SignatureMessage(ctx, testRequester, "racer", addr)
	require.NoError(t, err)
	req := RegisterRequest{Username: "racer", WalletAddress: addr, Signature: signTypedData(t, key, m), SignatureType: "eip712"}

	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := svc.Register(ctx, req)
			errs <- err
		}()
	}
	ok := 0
	for range n {
		err := <-errs
		if err == nil {
			ok++
			continue
		}
		require.True(t, IsValidation(err) || errors.Is(err, ErrConflict), "%v", err)
	}
	require.Equal(t, 1, ok)
	require.Equal(t, 1, svc.cfg.DB.Ent.Agent.Query().CountX(ctx))
}

func TestPruneSignatureChallenges(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clk := clock.NewStub(now.Add(-time.Hour))
	svc := newTestService(t, nil, Config{AgentMode: ModeTest, Clock: clk})
	_, addr := newEVMKey(t)
	expired, err := svc.SignatureMessage(ctx, testRequester, "old_one", addr)
	require.NoError(t, err)
	clk.Set(now)
	fresh, err := svc.SignatureMessage(ctx, testRequester, "fresh_one", addr)
	require.NoError(t, err)

	n, err := svc.PruneSignatureChallenges(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	left, err := svc.cfg.DB.Ent.SignatureChallenge.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, fresh.Nonce, left[0].Nonce)
	require.NotEqual(t, expired.Nonce, left[0].Nonce)

	n, err = svc.PruneSignatureChallenges(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to prune")
}

// TestSignatureChallengesBoundedPerRequester: anyone may ask for messages
// for any username and wallet, and a signature is tried against a bounded
// number of recent messages. Another requester asking for many messages
// for the victim's username and wallet cannot push the victim's message
// out: the victim's own newest messages are tried first. Only the victim's
// own requests move its window, and a submission from another address
// still finds an unflooded message.
func TestSignatureChallengesBoundedPerRequester(t *testing.T) {
	ctx := context.Background()
	const victimIP, attackerIP = "198.51.100.7", "192.0.2.66"
	register := func(svc *Service, key *ecdsa.PrivateKey, addr, username, requester string, m *SignatureMessage) error {
		_, err := svc.Register(ctx, RegisterRequest{Username: username, WalletAddress: addr,
			Signature: signTypedData(t, key, m), SignatureType: "eip712", Requester: requester})
		return err
	}

	t.Run("another requester's flood", func(t *testing.T) {
		svc := newTestService(t, nil, Config{AgentMode: ModeTest})
		key, addr := newEVMKey(t)
		m, err := svc.SignatureMessage(ctx, victimIP, "victim", addr)
		require.NoError(t, err)
		for range 3 * challengeCandidates {
			_, err := svc.SignatureMessage(ctx, attackerIP, "victim", addr)
			require.NoError(t, err)
		}
		require.NoError(t, register(svc, key, addr, "victim", victimIP, m))
	})

	t.Run("another requester's flood, wallet verification", func(t *testing.T) {
		svc := newTestService(t, nil, Config{AgentMode: ModeTest})
		victim := createBareAgent(t, svc, "victim")
		key, addr := newEVMKey(t)
		m, err := svc.SignatureMessage(ctx, victimIP, "victim", addr)
		require.NoError(t, err)
		for range 3 * challengeCandidates {
			_, err := svc.SignatureMessage(ctx, attackerIP, "victim", addr)
			require.NoError(t, err)
		}
		_, err = svc.VerifyWallet(ctx, victim, VerifyWalletRequest{WalletAddress: addr,
			Signature: signTypedData(t, key, m), SignatureType: "eip712", Requester: victimIP})
		require.NoError(t, err)
	})

	t.Run("the requester's own flood", func(t *testing.T) {
		svc := newTestService(t, nil, Config{AgentMode: ModeTest})
		key, addr := newEVMKey(t)
		m, err := svc.SignatureMessage(ctx, victimIP, "victim", addr)
		require.NoError(t, err)
		for range challengeCandidates {
			_, err := svc.SignatureMessage(ctx, victimIP, "victim", addr)
			require.NoError(t, err)
		}
		err = register(svc, key, addr, "victim", victimIP, m)
		require.True(t, IsValidation(err), "%v", err)
		require.ErrorContains(t, err, "does not recover")
	})

	t.Run("submitted from another address", func(t *testing.T) {
		svc := newTestService(t, nil, Config{AgentMode: ModeTest})
		key, addr := newEVMKey(t)
		m, err := svc.SignatureMessage(ctx, victimIP, "victim", addr)
		require.NoError(t, err)
		for range challengeCandidates - 1 {
			_, err := svc.SignatureMessage(ctx, victimIP, "victim", addr)
			require.NoError(t, err)
		}
		require.NoError(t, register(svc, key, addr, "victim", "2001:db8::5", m))
	})
}
