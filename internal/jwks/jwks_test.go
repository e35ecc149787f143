package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/stretchr/testify/require"
)

// issuer serves a JWKS over real HTTP and counts the fetches; keys can be
// rotated and the answer broken.
type issuer struct {
	srv  *httptest.Server
	hits atomic.Int32
	mu   sync.Mutex
	kids []string
	body string // instead of the set, when set
}

func newIssuer(t *testing.T, kids ...string) *issuer {
	is := &issuer{kids: kids}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.hits.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.body != "" {
			_, _ = w.Write([]byte(is.body))
			return
		}
		set := jwk.NewSet()
		for _, kid := range is.kids {
			priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			require.NoError(t, err)
			k, err := jwk.Import(&priv.PublicKey)
			require.NoError(t, err)
			require.NoError(t, k.Set(jwk.KeyIDKey, kid))
			require.NoError(t, set.AddKey(k))
		}
		require.NoError(t, json.NewEncoder(w).Encode(set))
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) set(kids ...string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.kids = kids
}

// A clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestRemoteRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	is := newIssuer(t, "a")
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	r := NewRemote(RemoteConfig{URL: is.srv.URL, Now: clk.Now, TTL: time.Hour, MinRefresh: 30 * time.Second})

	// Nothing is fetched before a key is needed; then once.
	require.Equal(t, int32(0), is.hits.Load())
	keys, err := r.Lookup(ctx, "a")
	require.NoError(t, err)
	require.Len(t, keys, 1)
	_, err = r.Lookup(ctx, "")
	require.NoError(t, err)
	require.Equal(t, int32(1), is.hits.Load())

	// The issuer rotates: an unknown kid fetches again, once per
	// MinRefresh however many ask.
	is.set("b")
	clk.Add(31 * time.Second)
	for range 5 {
		_, err = r.Lookup(ctx, "zzz")
		require.ErrorIs(t, err, ErrUnknownKey)
	}
	require.Equal(t, int32(2), is.hits.Load())
	// The rotated key was fetched by that refresh.
	keys, err = r.Lookup(ctx, "b")
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, int32(2), is.hits.Load())
	_, err = r.Lookup(ctx, "a")
	require.ErrorIs(t, err, ErrUnknownKey)

	// Old keys are fetched again; a failed fetch keeps them.
	clk.Add(time.Hour)
	is.mu.Lock()
	is.body = "not json"
	is.mu.Unlock()
	_, err = r.Lookup(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, int32(3), is.hits.Load())
}

func TestRemoteConcurrentFirstFetch(t *testing.T) {
	t.Parallel()
	is := newIssuer(t, "a")
	r := NewRemote(RemoteConfig{URL: is.srv.URL})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = r.Lookup(context.Background(), "a") })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(1), is.hits.Load())
}

func TestRemoteBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		cfg     RemoteConfig
		err     string
	}{
		{"too large", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"keys":[` + strings.Repeat(" ", 2000) + `]}`))
		}, RemoteConfig{MaxBytes: 1000}, "larger than 1000 bytes"},
		{"too slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}, RemoteConfig{Timeout: 100 * time.Millisecond}, "deadline exceeded"},
		{"not 200", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) },
			RemoteConfig{}, "status 404"},
		{"no keys", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"keys":[]}`)) },
			RemoteConfig{}, "holds no key"},
		{"a symmetric key", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"a"}]}`))
		}, RemoteConfig{}, "symmetric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			cfg := tc.cfg
			cfg.URL = srv.URL
			_, err := NewRemote(cfg).Lookup(context.Background(), "a")
			require.ErrorIs(t, err, ErrUnavailable)
			require.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestParseKeyFile(t *testing.T) {
	t.Parallel()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	k, err := jwk.Import(priv) // a private key: kept public only
	require.NoError(t, err)
	one, err := json.Marshal(k)
	require.NoError(t, err)
	set, err := Parse(one)
	require.NoError(t, err)
	require.Equal(t, 1, set.Len())
	got, _ := set.Key(0)
	isPrivate, err := jwk.IsPrivateKey(got)
	require.NoError(t, err)
	require.False(t, isPrivate)

	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	require.NoError(t, err)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	set, err = Parse(pemBytes)
	require.NoError(t, err)
	require.Equal(t, 1, set.Len())

	_, err = Parse([]byte("nonsense"))
	require.Error(t, err)
}
