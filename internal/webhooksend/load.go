package webhooksend

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"agentpay/internal/store"
)

// Delivery is what one try of a delivery needs, read in one statement: the
// delivery's state, its event's payload, and its merchant's webhook URL and
// sealed secrets of both modes (the root picks the event's mode: which URL
// a try goes to is its rule).
type Delivery struct {
	ID         uuid.UUID
	Status     string
	Attempts   int
	EventID    uuid.UUID
	Payload    []byte
	Livemode   bool
	MerchantID uuid.UUID
	// NextAttemptAt is when the delivery is next due, or until when a
	// batch holds it (its lease); nil once done.
	NextAttemptAt *time.Time
	Live, Test    Endpoint
}

// Endpoint is a merchant's webhook URL and sealed secrets of one mode, as
// stored.
type Endpoint struct {
	URL              string
	Secret, Previous []byte
	// PreviousUntil ends the previous secret's overlap; nil: none.
	PreviousUntil *time.Time
}

const loadColumns = `SELECT d.id, d.status, d.attempts, d.next_attempt_at, e.id, e.payload, e.livemode, m.id,
	COALESCE(m.webhook_url, ''), m.webhook_secret_encrypted, m.webhook_secret_previous_encrypted, m.webhook_secret_previous_expires_at,
	COALESCE(m.test_webhook_url, ''), m.test_webhook_secret_encrypted, m.test_webhook_secret_previous_encrypted, m.test_webhook_secret_previous_expires_at
FROM webhook_deliveries d
JOIN webhook_events e ON e.id = d.event_id
JOIN merchants m ON m.id = e.merchant_id
WHERE d.id `

func scanDelivery(rows *sql.Rows, found map[uuid.UUID]*Delivery) error {
	var (
		d                  Delivery
		liveUntil, testEnd sql.NullTime
		next               sql.NullTime
	)
	if err := rows.Scan(&d.ID, &d.Status, &d.Attempts, &next, &d.EventID, &d.Payload, &d.Livemode, &d.MerchantID,
		&d.Live.URL, &d.Live.Secret, &d.Live.Previous, &liveUntil,
		&d.Test.URL, &d.Test.Secret, &d.Test.Previous, &testEnd); err != nil {
		return err
	}
	if next.Valid {
		d.NextAttemptAt = &next.Time
	}
	if liveUntil.Valid {
		d.Live.PreviousUntil = &liveUntil.Time
	}
	if testEnd.Valid {
		d.Test.PreviousUntil = &testEnd.Time
	}
	found[d.ID] = &d
	return nil
}

func key(id uuid.UUID) uuid.UUID { return id }

const (
	loadManyPostgres = loadColumns + "= ANY($1::uuid[])"
	loadManySQLite   = loadColumns + "IN (SELECT value FROM json_each(?))"
)

func idsArgPostgres(ids []uuid.UUID) []any {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return []any{pq.StringArray(s)}
}

func idsArgSQLite(ids []uuid.UUID) []any {
	b, _ := json.Marshal(ids) // uuid.UUID marshals as its text form
	return []any{string(b)}
}

// LoadMany reads the deliveries ids (a batch just claimed, Claim) in one
// statement, by id; an id with no delivery is missing from the answer.
func LoadMany(ctx context.Context, db *store.DB, ids []uuid.UUID) (map[uuid.UUID]*Delivery, error) {
	q, args := loadManySQLite, idsArgSQLite(ids)
	if db.IsPostgres() {
		q, args = loadManyPostgres, idsArgPostgres(ids)
	}
	rows, err := db.SQL.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	found := make(map[uuid.UUID]*Delivery, len(ids))
	for rows.Next() {
		if err := scanDelivery(rows, found); err != nil {
			return nil, err
		}
	}
	return found, rows.Err()
}

// The reads of deliveries whose tries start together share one statement
// (store.Batched), by delivery id: every read that arrives during one joins
// the next, at most 256 a statement. One read per delivery was a round trip
// each, and on SQLite, whose one connection every statement of the process
// takes in turn, a turn each.
var (
	loadsPostgres = store.NewBatched(store.BatchSpec[uuid.UUID, uuid.UUID, *Delivery]{
		SQL: loadManyPostgres, Args: idsArgPostgres,
		Scan: scanDelivery, Key: key, Max: 256, Timeout: 10 * time.Second,
	})
	loadsSQLite = store.NewBatched(store.BatchSpec[uuid.UUID, uuid.UUID, *Delivery]{
		SQL: loadManySQLite, Args: idsArgSQLite,
		Scan: scanDelivery, Key: key, Max: 256, Timeout: 10 * time.Second,
	})
)

// Load reads delivery id with its event and merchant; nil when there is no
// such delivery.
func Load(ctx context.Context, db *store.DB, id uuid.UUID) (*Delivery, error) {
	if db.IsPostgres() {
		return loadsPostgres.Do(ctx, db, id)
	}
	return loadsSQLite.Do(ctx, db, id)
}
