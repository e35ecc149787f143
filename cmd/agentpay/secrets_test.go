package main

// The secrets check of the end-to-end test: everything a run shows the
// outside (its logs and printed output, every HTTP answer, the webhooks it
// sends, the job errors River keeps) is searched for every secret the run
// holds or created. The run's RPC URLs carry provider credentials through
// rpcProviders, which serve only requests that carry them.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	sol "github.com/gagliardetto/solana-go"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/chains/devnet"
	"agentpay/internal/store"
	"agentpay/internal/treasury"
	"agentpay/internal/vault"
)

// leakWatch holds what a run showed and the secrets it must never show.
type leakWatch struct {
	// logs is what the run logged and printed.
	logs lockedBuffer

	mu      sync.Mutex
	answers []recordedAnswer
	// secrets maps each secret to what it is.
	secrets map[string]string
}

type recordedAnswer struct {
	method, path string
	status       int
	body         []byte
}

func newLeakWatch() *leakWatch { return &leakWatch{secrets: map[string]string{}} }

// addSecret records a secret, in every form it could be printed in.
func (w *leakWatch) addSecret(what, value string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(value) >= 6 {
		w.secrets[value] = what
	}
}

// addKey records a key's bytes as hex (either case) and base64; a
// 64-byte Solana key also as base58, its usual form.
func (w *leakWatch) addKey(what string, key []byte) {
	w.addSecret(what+" (hex)", hex.EncodeToString(key))
	w.addSecret(what+" (HEX)", strings.ToUpper(hex.EncodeToString(key)))
	w.addSecret(what+" (base64)", base64.StdEncoding.EncodeToString(key))
	w.addSecret(what+" (base64url)", base64.RawURLEncoding.EncodeToString(key))
	if len(key) == 64 {
		w.addSecret(what+" (base58)", sol.PrivateKey(key).String())
	}
}

// proxy is a reverse proxy to target that records every answer; the test
// talks to the run only through it.
func (w *leakWatch) proxy(t *testing.T, target string) string {
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		w.mu.Lock()
		w.answers = append(w.answers, recordedAnswer{
			method: resp.Request.Method, path: resp.Request.URL.RequestURI(), status: resp.StatusCode, body: body,
		})
		w.mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// secretField names the fields of an answer that hand out a secret: keys
// shown once, webhook secrets.
var secretField = regexp.MustCompile(`(?i)secret|api_key`)

// secretPrefixes are the prefixes of the secrets handed out.
var secretPrefixes = []string{"whsec_", "sk_live_", "sk_test_", "ak_"}

// issuedSecrets finds the secrets the answers handed out and records them;
// it answers which answer handed out each, the one answer allowed to show it.
func (w *leakWatch) issuedSecrets() map[string]int {
	w.mu.Lock()
	answers := append([]recordedAnswer(nil), w.answers...)
	w.mu.Unlock()
	issuer := map[string]int{}
	for i, a := range answers {
		var v any
		if json.Unmarshal(a.body, &v) != nil {
			continue
		}
		walkJSON(v, "", func(field, value string) {
			if !secretField.MatchString(field) || strings.HasPrefix(value, "pk_") {
				return
			}
			if _, seen := issuer[value]; !seen {
				issuer[value] = i
				what := fmt.Sprintf("%s handed out by %s %s", field, a.method, a.path)
				w.addSecret(what, value)
				// The random part alone too: a webhook secret's base64
				// is the signing key, and a key's body is what it is.
				for _, prefix := range secretPrefixes {
					if rest, ok := strings.CutPrefix(value, prefix); ok {
						issuer[rest] = i
						w.addSecret(what+" (without "+prefix+")", rest)
					}
				}
			}
		})
	}
	return issuer
}

func walkJSON(v any, field string, fn func(field, value string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			walkJSON(x, k, fn)
		}
	case []any:
		for _, x := range v {
			walkJSON(x, field, fn)
		}
	case string:
		fn(field, v)
	}
}

// addWalletKeys records every key the run's database lets the service
// sign with: the treasury's, each custodial wallet's and each deposit
// address's, with the seeds they come from.
func (w *leakWatch) addWalletKeys(t *testing.T, databaseURL string, masterKey []byte) {
	v, err := vault.New(masterKey)
	require.NoError(t, err)
	w.addKey("deposit seed", v.DepositSeed())
	w.addKey("treasury seed", v.TreasurySeed())
	families := adapters.Families()
	tk, err := treasury.Derive(v, families)
	require.NoError(t, err)
	w.addKey("treasury EVM key", tk.EVM)
	w.addKey("treasury Solana key", tk.Solana)

	ctx := context.Background()
	db, err := store.OpenDB(ctx, store.DBConfig{URL: databaseURL})
	require.NoError(t, err)
	defer db.Close()
	wallets, err := db.Ent.Wallet.Query().All(ctx)
	require.NoError(t, err)
	custodial := 0
	for _, wl := range wallets {
		if len(wl.EncryptedKey) == 0 {
			continue
		}
		key, err := v.Open(wl.EncryptedKey, wl.ID[:])
		require.NoError(t, err)
		w.addKey("key of wallet "+wl.Address, key)
		custodial++
	}
	require.Positive(t, custodial, "the run created custodial wallets")
	deposits, err := db.Ent.DepositAddress.Query().All(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, deposits, "the run allocated deposit addresses")
	for _, da := range deposits {
		key, addr, err := families[chains.Family(da.ChainFamily)].DeriveKey(v.DepositSeed(), uint32(da.DerivationIndex))
		require.NoError(t, err)
		require.Equal(t, da.Address, addr)
		w.addKey("key of deposit address "+addr, key)
	}
}

// riverErrors are the job errors River keeps in its table (its UI and
// any operator query show them).
func riverErrors(t *testing.T, databaseURL string) string {
	ctx := context.Background()
	db, err := store.OpenDB(ctx, store.DBConfig{URL: databaseURL})
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.SQL.QueryContext(ctx, `SELECT CAST(errors AS TEXT) FROM river_job WHERE errors IS NOT NULL`)
	require.NoError(t, err)
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		b.WriteString(s + "\n")
	}
	require.NoError(t, rows.Err())
	return b.String()
}

// requireNoLeak fails for every secret found anywhere the run showed it,
// other than the one answer that handed it out.
func (w *leakWatch) requireNoLeak(t *testing.T, issuer map[string]int, webhooks []receivedWebhook, jobErrors string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	logs := w.logs.String()
	var delivered strings.Builder
	for _, d := range webhooks {
		delivered.Write(d.Body)
		for k, vs := range d.Header {
			fmt.Fprintf(&delivered, "\n%s: %s", k, strings.Join(vs, ", "))
		}
		delivered.WriteString("\n")
	}
	secrets := make([]string, 0, len(w.secrets))
	for s := range w.secrets {
		secrets = append(secrets, s)
	}
	sort.Strings(secrets)
	for _, s := range secrets {
		what := w.secrets[s]
		if i := strings.Index(logs, s); i >= 0 {
			t.Errorf("%s is in the logs: %s", what, lineAround(logs, i))
		}
		for i, a := range w.answers {
			if j, ok := issuer[s]; ok && j == i {
				continue
			}
			if bytes.Contains(a.body, []byte(s)) {
				t.Errorf("%s is in the answer to %s %s (%d): %s", what, a.method, a.path, a.status, a.body)
			}
		}
		if strings.Contains(delivered.String(), s) {
			t.Errorf("%s is in a webhook delivery", what)
		}
		if i := strings.Index(jobErrors, s); i >= 0 {
			t.Errorf("%s is in River's job errors: %s", what, lineAround(jobErrors, i))
		}
	}
	t.Logf("searched %d secrets in %d bytes of logs, %d answers (%d errors), %d webhook deliveries and %d bytes of job errors",
		len(secrets), len(logs), len(w.answers), w.errorAnswers(), len(webhooks), len(jobErrors))
}

func (w *leakWatch) errorAnswers() int {
	n := 0
	for _, a := range w.answers {
		if a.status >= 400 {
			n++
		}
	}
	return n
}

func lineAround(s string, i int) string {
	start := strings.LastIndexByte(s[:i], '\n') + 1
	end := strings.IndexByte(s[i:], '\n')
	if end < 0 {
		return s[start:]
	}
	return s[start : i+end]
}

// rpcProvider stands in for a hosted RPC provider in front of a devnet: it
// serves only requests carrying its credentials where providers take them
// (basic auth, a key in the path, another in the query), forwards them to
// the devnet without them, and can go down.
type rpcProvider struct {
	srv                           *httptest.Server
	user, pass, pathKey, queryKey string
	served, refused               atomic.Int64
}

func newRPCProvider(t *testing.T, upstream string, w *leakWatch, what string) *rpcProvider {
	target, err := url.Parse(upstream)
	require.NoError(t, err)
	p := &rpcProvider{user: "rpcuser" + randomHex(t, 4), pass: randomHex(t, 10), pathKey: randomHex(t, 16), queryKey: randomHex(t, 12)}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.URL.Path, r.Out.URL.RawPath, r.Out.URL.RawQuery = target.Path, "", ""
		r.Out.Header.Del("Authorization")
	}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != p.user || pass != p.pass || r.URL.Path != "/v2/"+p.pathKey || r.URL.Query().Get("api-key") != p.queryKey {
			p.refused.Add(1)
			http.Error(rw, "unauthorized", http.StatusUnauthorized)
			return
		}
		p.served.Add(1)
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(p.Down)
	w.addSecret(what+" RPC user", p.user)
	w.addSecret(what+" RPC password", p.pass)
	w.addSecret(what+" RPC path key", p.pathKey)
	w.addSecret(what+" RPC query key", p.queryKey)
	return p
}

// URL is the provider's endpoint with its credentials.
func (p *rpcProvider) URL() string {
	u, _ := url.Parse(p.srv.URL)
	u.User = url.UserPassword(p.user, p.pass)
	u.Path = "/v2/" + p.pathKey
	u.RawQuery = "api-key=" + p.queryKey
	return u.String()
}

// Down stops the provider: connections are refused from now on.
func (p *rpcProvider) Down() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// liveChains are the live networks of the end-to-end run: one EVM devnet
// standing in for the four EVM chains and one Solana devnet, each chain
// reached through its own rpcProvider.
type liveChains struct {
	evm       *devnet.EVM
	providers map[chains.Name]*rpcProvider
}

// startLiveChains starts the devnets, funds the treasury's gas on them and
// sets the live chains' variables in env.
func startLiveChains(t *testing.T, env map[string]string, tk treasury.Keys, w *leakWatch) *liveChains {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := devnet.StartEVM(ctx, devnet.EVMConfig{
		Chain: chains.Base, BlockTime: 200 * time.Millisecond,
		Fund: []common.Address{common.HexToAddress(tk.EVMAddress)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	s, err := devnet.StartSolana(ctx, devnet.SolanaConfig{Fund: []sol.PublicKey{sol.MustPublicKeyFromBase58(tk.SolanaAddress)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	l := &liveChains{evm: e, providers: map[chains.Name]*rpcProvider{}}
	for _, name := range chains.All {
		upstream, usdc := e.RPCURL, e.USDC.Hex()
		if name == chains.Solana {
			upstream, usdc = s.RPCURL, s.Mint.String()
		}
		p := newRPCProvider(t, upstream, w, "live "+string(name))
		l.providers[name] = p
		prefix := "CHAIN_" + strings.ToUpper(string(name)) + "_"
		env[prefix+"RPC_URL"] = p.URL()
		env[prefix+"USDC"] = usdc
		env[prefix+"CONFIRMATIONS"] = "2"
	}
	return l
}

// requireCredentialsAccepted: every live chain was reached through its
// provider, and no request came without the credentials.
func (l *liveChains) requireCredentialsAccepted(t *testing.T) {
	for name, p := range l.providers {
		require.Positive(t, p.served.Load(), "live %s was reached through its provider", name)
		require.Zero(t, p.refused.Load(), "every request to live %s carried the credentials", name)
	}
}

// Down stops every provider: the live chains' RPC calls fail from now on.
func (l *liveChains) Down() {
	for _, p := range l.providers {
		p.Down()
	}
}

// withDatabasePassword adds a password to a PostgreSQL URL (the test
// server trusts loopback, so it is never checked, only carried).
func withDatabasePassword(t *testing.T, databaseURL string, w *leakWatch) string {
	u, err := url.Parse(databaseURL)
	require.NoError(t, err)
	pass := "dbpass" + randomHex(t, 8)
	u.User = url.UserPassword(u.User.Username(), pass)
	w.addSecret("database password", pass)
	return u.String()
}

// TestStartupErrorsHideSecrets: the commands refuse to start when the
// database cannot be reached or a URL is wrong, and start (serving the
// chain not ready, adapters.StartInBackground) when an EVM chain's node
// cannot be reached; what they say (the error main prints, the logs) names
// the variable and the endpoint, never the credentials in its URL.
func TestStartupErrorsHideSecrets(t *testing.T) {
	key, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	secrets := []string{"rpcUser", "rpcPassw0rd", "PathKeyAbc123xyz", "QueryKeyDef456uvw", "dbPassw0rd"}
	tests := []struct {
		cmd      string
		env      map[string]string
		endpoint string // named in what is shown
		starts   bool   // serves (until stopped) rather than failing
	}{
		{"serve", map[string]string{"CHAIN_BASE_RPC_URL": "http://rpcUser:rpcPassw0rd@" + dead + "/v2/PathKeyAbc123xyz?api-key=QueryKeyDef456uvw"}, dead, true},
		{"worker", map[string]string{"CHAIN_SOLANA_TEST_RPC_URL": "http://rpcUser:rpcPassw0rd@" + dead + "/v2/PathKeyAbc123xyz?api-key=QueryKeyDef456uvw"}, dead, false},
		{"migrate", map[string]string{"DATABASE_URL": "postgres://agentpay:dbPassw0rd@" + dead + "/agentpay?sslmode=disable"}, dead, false},
		{"serve", map[string]string{"DATABASE_URL": "postgres://agentpay:dbPassw0rd@" + dead + "/agentpay?sslmode=bogus"}, "DATABASE_URL", false},
		{"migrate", map[string]string{"DATABASE_URL": "postgres://agentpay:dbPassw0rd with space@" + dead + "/agentpay"}, "DATABASE_URL", false},
		{"worker", map[string]string{"DATABASE_URL": "postgresql://agentpay:dbPassw0rd@[::1/agentpay"}, "DATABASE_URL", false},
	}
	for _, tt := range tests {
		env := map[string]string{
			"DATA_DIR":   t.TempDir(),
			"HTTP_ADDR":  "127.0.0.1:0",
			"MASTER_KEY": hex.EncodeToString(key),
			"LOG_LEVEL":  "debug",
		}
		for k, v := range tt.env {
			env[k] = v
		}
		var out, logs bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := run(ctx, []string{tt.cmd}, func(k string) string { return env[k] }, &out, &logs)
		cancel()
		shown := out.String() + logs.String()
		if tt.starts {
			require.NoError(t, err, "%s with %v serves until stopped", tt.cmd, tt.env)
		} else {
			require.Error(t, err, "%s with %v", tt.cmd, tt.env)
			shown += err.Error()
		}
		require.Contains(t, shown, tt.endpoint)
		for _, s := range secrets {
			require.NotContains(t, shown, s, "%s with %v", tt.cmd, tt.env)
		}
	}
}
