// Package jwks holds the public keys an issuer of JWTs publishes as a JSON
// Web Key Set (RFC 7517): fetched over HTTP(S) with a bounded time and
// size, kept for a while, refreshed when old, and refreshed early, at most
// once per MinRefresh, when a token names a key id the set does not hold
// (the issuer rotated its keys). A set given at start (a key file) never
// changes.
//
// jwx has a cache of its own (jwk.Cache, on httprc) that refreshes in
// background goroutines for the life of a context; this one fetches on
// demand, from the request that needs the keys, so the service has nothing
// to start or stop, and a partner nobody verifies with is never fetched.
package jwks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"golang.org/x/sync/singleflight"
)

// Defaults of Remote.
const (
	// DefaultTimeout bounds one fetch, connection to last byte.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxBytes bounds a fetched set: a set of a few dozen keys is
	// far below.
	DefaultMaxBytes = 64 << 10
	// DefaultTTL is how long fetched keys are used before they are fetched
	// again (Skyfire, for one, says its set may be cached for an hour).
	DefaultTTL = time.Hour
	// DefaultMinRefresh is how often at most an unknown key id, or a
	// failed fetch, leads to another fetch: a stream of tokens with made-up
	// key ids costs the issuer one request per MinRefresh.
	DefaultMinRefresh = 30 * time.Second
	// MaxKeys bounds the keys of a set.
	MaxKeys = 100
)

// ErrUnknownKey is a key id the set does not hold, even after a refresh.
var ErrUnknownKey = errors.New("unknown key id")

// ErrUnavailable is a set that could not be fetched (and was never
// fetched before).
var ErrUnavailable = errors.New("key set unavailable")

// Keys is a key set to look keys up in.
type Keys interface {
	// Lookup returns the keys with id kid, or every key when kid is empty.
	// An unknown kid is ErrUnknownKey; a set that cannot be had
	// ErrUnavailable.
	Lookup(ctx context.Context, kid string) ([]jwk.Key, error)
}

// Static is a set given at start; its keys are public keys.
type Static struct{ set jwk.Set }

// NewStatic keeps the public keys of set.
func NewStatic(set jwk.Set) (*Static, error) {
	pub, err := publicSet(set)
	if err != nil {
		return nil, err
	}
	return &Static{set: pub}, nil
}

// Lookup implements Keys.
func (s *Static) Lookup(_ context.Context, kid string) ([]jwk.Key, error) {
	keys := lookup(s.set, kid)
	if len(keys) == 0 {
		return nil, ErrUnknownKey
	}
	return keys, nil
}

// Parse reads a key file: a JWK Set, one JWK, or PEM (a public key or a
// certificate). Private keys are reduced to their public part.
func Parse(data []byte) (jwk.Set, error) {
	set, err := jwk.Parse(data, jwk.WithPEM(isPEM(data)))
	if err != nil {
		return nil, err
	}
	return publicSet(set)
}

func isPEM(data []byte) bool {
	for _, b := range data {
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b == '-'
	}
	return false
}

// RemoteConfig configures a Remote; zero values are the defaults.
type RemoteConfig struct {
	URL        string
	Client     *http.Client // nil: one with Timeout
	Timeout    time.Duration
	MaxBytes   int64
	TTL        time.Duration
	MinRefresh time.Duration
	// Now is the time (tests); nil is time.Now.
	Now func() time.Time
}

// Remote is a key set fetched from a URL.
type Remote struct {
	cfg     RemoteConfig
	fetches singleflight.Group

	mu        sync.Mutex
	set       jwk.Set   // nil until a fetch succeeded
	fetchedAt time.Time // of set
	triedAt   time.Time // the last fetch, successful or not
	lastErr   error     // of the last fetch
}

// NewRemote returns the set at cfg.URL; nothing is fetched until a key is
// looked up.
func NewRemote(cfg RemoteConfig) *Remote {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MinRefresh <= 0 {
		cfg.MinRefresh = DefaultMinRefresh
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Remote{cfg: cfg}
}

// Lookup implements Keys: keys older than TTL are fetched again first; a
// kid the set does not hold fetches it again, at most once per MinRefresh
// (fetch says). A failed fetch keeps the keys fetched before.
func (r *Remote) Lookup(ctx context.Context, kid string) ([]jwk.Key, error) {
	set, stale := r.state()
	if stale {
		fresh, err := r.fetch(ctx)
		switch {
		case err == nil:
			set = fresh
		case set == nil:
			return nil, err
		}
	}
	if keys := lookup(set, kid); len(keys) > 0 {
		return keys, nil
	}
	if kid == "" {
		return nil, ErrUnknownKey
	}
	// An unknown key id: the issuer may have rotated its keys.
	fresh, err := r.fetch(ctx)
	if err != nil {
		return nil, ErrUnknownKey
	}
	if keys := lookup(fresh, kid); len(keys) > 0 {
		return keys, nil
	}
	return nil, ErrUnknownKey
}

// state is the set in hand (nil before the first successful fetch) and
// whether it is missing or older than TTL.
func (r *Remote) state() (set jwk.Set, stale bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.set, r.set == nil || r.cfg.Now().Sub(r.fetchedAt) >= r.cfg.TTL
}

// fetch gets the set once for every caller waiting at the time, detached
// from any one caller's cancellation (the others wait for it). Within
// MinRefresh of the last fetch it fetches nothing and answers what that
// fetch left: the set, or its error when there is none.
func (r *Remote) fetch(ctx context.Context) (jwk.Set, error) {
	v, err, _ := r.fetches.Do("", func() (any, error) {
		r.mu.Lock()
		if !r.triedAt.IsZero() && r.cfg.Now().Sub(r.triedAt) < r.cfg.MinRefresh {
			// Another caller fetched while this one decided to.
			set, err := r.set, r.lastErr
			r.mu.Unlock()
			if set == nil {
				if err == nil {
					err = ErrUnavailable
				}
				return nil, err
			}
			return set, nil
		}
		r.triedAt = r.cfg.Now()
		r.mu.Unlock()

		set, err := r.get(context.WithoutCancel(ctx))
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.lastErr = fmt.Errorf("%w: %v", ErrUnavailable, err)
			return nil, r.lastErr
		}
		r.set, r.fetchedAt, r.lastErr = set, r.cfg.Now(), nil
		return set, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(jwk.Set), nil
}

// get is one bounded GET of the set.
func (r *Remote) get(ctx context.Context) (jwk.Set, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", r.cfg.URL, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, r.cfg.MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > r.cfg.MaxBytes {
		return nil, fmt.Errorf("GET %s: the key set is larger than %d bytes", r.cfg.URL, r.cfg.MaxBytes)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", r.cfg.URL, err)
	}
	return publicSet(set)
}

// publicSet checks a set's size and keeps the public part of its keys.
func publicSet(set jwk.Set) (jwk.Set, error) {
	switch n := set.Len(); {
	case n == 0:
		return nil, errors.New("the key set holds no key")
	case n > MaxKeys:
		return nil, fmt.Errorf("the key set holds %d keys, more than %d", n, MaxKeys)
	}
	return jwk.PublicSetOf(set)
}

// lookup is the keys of set with id kid, or all of them for "".
func lookup(set jwk.Set, kid string) []jwk.Key {
	var out []jwk.Key
	for i := range set.Len() {
		k, _ := set.Key(i)
		if id, _ := k.KeyID(); kid == "" || id == kid {
			out = append(out, k)
		}
	}
	return out
}
