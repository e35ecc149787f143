package ratelimit

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

var errUnknownKey = errors.New("unknown key")

// testKey is a credential naming a row of agents by its api_key_hash; it
// counts how often it is read.
type testKey struct {
	db    *store.DB
	hash  string
	reads int // Authenticate and Read calls
}

// keySource reads a testKey's agent within the reservation.
var keySource = Source{Subject: "SELECT id, tier FROM agents WHERE api_key_hash = $1", Columns: []string{"a.id", "a.tier"}}

func (k *testKey) Hint() string   { return k.hash }
func (k *testKey) Unknown() error { return errUnknownKey }

func (k *testKey) Authenticate(ctx context.Context) (Subject[uuid.UUID], error) {
	k.reads++
	a, err := k.db.Ent.Agent.Query().Where(agent.APIKeyHash([]byte(k.hash))).Only(ctx)
	if ent.IsNotFound(err) {
		return Subject[uuid.UUID]{}, errUnknownKey
	}
	if err != nil {
		return Subject[uuid.UUID]{}, err
	}
	return Subject[uuid.UUID]{ID: a.ID, Class: string(a.Tier)}, nil
}

func (k *testKey) Read(ctx context.Context, query string, args []any, counts []sql.NullInt64) (Subject[uuid.UUID], error) {
	k.reads++
	args[0] = []byte(k.hash)
	rows, err := k.db.QueryCached(ctx, query, args...)
	if err != nil {
		return Subject[uuid.UUID]{}, err
	}
	defer rows.Close()
	var sub Subject[uuid.UUID]
	dest := []any{&sub.ID, &sub.Class}
	for i := range counts {
		dest = append(dest, &counts[i])
	}
	found := false
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return Subject[uuid.UUID]{}, err
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		return Subject[uuid.UUID]{}, err
	}
	if !found {
		return Subject[uuid.UUID]{}, errUnknownKey
	}
	return sub, nil
}

func createAgent(t *testing.T, db *store.DB, name, hash string, tier agent.Tier) uuid.UUID {
	t.Helper()
	return db.Ent.Agent.Create().SetUsername(name).SetAPIKeyHash([]byte(hash)).SetInviteCode(name).SetTier(tier).
		SaveX(context.Background()).ID
}

// A request that names its subject by a credential reads the credential
// once: a credential the instance has not seen is read and reserved for in
// one statement; a known one is read (the caller's cache) while its
// subject's lease serves; one that now names another subject is decided
// for that subject. On SQLite it is read, then counted.
func TestAllowCredential(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	lim, _ := newTestLimiter(t, db)
	l := NewLimit[uuid.UUID](lim, tiers, &keySource)
	ctx := context.Background()
	first := createAgent(t, db, "first", "key-1", agent.TierT4)

	allow := func(hash string) (Subject[uuid.UUID], Decision, error) {
		t.Helper()
		k := &testKey{db: db, hash: hash}
		sub, dec, err := l.AllowCredential(ctx, k)
		require.Equal(t, 1, k.reads, "the credential is read once a request")
		return sub, dec, err
	}

	sub, dec, err := allow("key-1")
	require.NoError(t, err)
	require.Equal(t, Subject[uuid.UUID]{ID: first, Class: "T4"}, sub)
	require.Equal(t, 299, dec.Remaining)
	if testdb.IsPostgres() {
		// Read and reserved in one statement: one hit of each window.
		require.GreaterOrEqual(t, counterValue(t, db, subjectKey(sub, "hour"), epoch), int64(1))
	}
	for i := 2; i <= 5; i++ {
		sub, dec, err = allow("key-1")
		require.NoError(t, err)
		require.Equal(t, first, sub.ID)
		require.Equal(t, 300-i, dec.Remaining)
	}

	_, _, err = allow("no-such-key")
	require.ErrorIs(t, err, errUnknownKey)

	// The key now names another agent (of another tier): its requests count
	// against that agent.
	db.Ent.Agent.UpdateOneID(first).SetAPIKeyHash([]byte("key-1-old")).ExecX(ctx)
	second := createAgent(t, db, "second", "key-1", agent.TierT0)
	sub, dec, err = allow("key-1")
	require.NoError(t, err)
	require.Equal(t, Subject[uuid.UUID]{ID: second, Class: "T0"}, sub)
	require.Equal(t, Decision{Allowed: true, Limit: 10, Remaining: 9, Reset: epoch.Add(time.Minute), Window: "minute"}, dec)
	if testdb.IsPostgres() {
		require.EqualValues(t, 1, counterValue(t, db, subjectKey(sub, "minute"), epoch))
	}
}
