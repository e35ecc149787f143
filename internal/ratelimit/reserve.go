package ratelimit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Source is how a reservation statement reads a subject by credential, so
// that a request of a credential this instance has not seen lately costs
// one round trip.
type Source struct {
	// Subject selects the subject's row by the credential, $1: at most one
	// row, with columns id and the scheme's ClassColumn.
	Subject string
	// Columns are what the statement answers before the counts: columns of
	// a (the subject row) and of what Join adds.
	Columns []string
	// Join follows "FROM a" (with the reservation's own CTEs): "LEFT JOIN
	// wallets w ON w.agent_id = a.id" answers a row per wallet.
	Join string
}

// Credential is what a request presented instead of its subject's id (an
// API key). The Limit reads it only when it must: once per request at
// most, through the caller's cache, or within the reservation statement.
type Credential[K comparable] interface {
	// Hint names the credential among the instance's hints: which subject
	// it last was (an API key's hash).
	Hint() string
	// Authenticate reads the credential's subject.
	Authenticate(ctx context.Context) (Subject[K], error)
	// Read runs the reservation statement query with args: args[0] is nil,
	// for Read to set to the credential ($1 of Source.Subject). It scans
	// Source.Columns of the rows, then the counts of the first row into
	// counts, and returns the subject read.
	Read(ctx context.Context, query string, args []any, counts []sql.NullInt64) (Subject[K], error)
	// Unknown is the error of a credential that names no subject, from
	// Authenticate and Read: the hint is then forgotten.
	Unknown() error
}

// Statements are the statements a Limit sends to PostgreSQL.
type Statements struct {
	// Reserve reserves hits for a subject by id; ReserveByCredential reads
	// the subject by a Source and reserves, in one statement ("" without a
	// Source).
	Reserve, ReserveByCredential string
	// Count counts one request in every window, without leases.
	Count string
	// Cleanup deletes the counters of finished windows.
	Cleanup string
}

// Statements returns what a Limit of s (with src) sends to PostgreSQL; the
// service pins them (golden files), since they run on every authenticated
// request.
func (s Scheme) Statements(src *Source) Statements {
	return s.statements(s.compile(), src)
}

func (s Scheme) statements(ws *windowSet, src *Source) Statements {
	st := Statements{Reserve: s.reserveSQL(ws, nil), Count: countSQL(len(ws.others)), Cleanup: cleanupSQL}
	if src != nil {
		st.ReserveByCredential = s.reserveSQL(ws, src)
	}
	return st
}

// reserveSQL builds the statement reserving hits for a subject, in one
// round trip. With src the subject is read by credential ($1) and the
// statement answers a row per row of src's Join (src's Columns), as reading
// the credential alone would; without, $1 is the subject's id and the
// answer one row. No subject, no row, and nothing reserved.
//
// Of n windows, $2+2i and $3+2i are window i's start and end, $2+2n+i the
// hits wanted in it (0: none). A scheme with classes takes the limits from
// the subject's class (a CASE over the classes; the class is $2+3n when
// the subject is given by id); one without takes window i's limit as
// $2+3n+i. Each row ends with the counts of each window in order: the
// counter locked before reserving (NULL when it did not lock: nothing
// wanted, an earlier window refused this one's reservation, or no row yet),
// the counter after reserving (NULL when nothing was reserved), and the
// counter in the statement's snapshot (NULL when no row). Keys as the
// counting statement writes them ('<name>:<id>:<window key>').
//
// A window's reservation locks its row (SELECT FOR UPDATE: in READ
// COMMITTED, the latest version), then writes locked + the grant, the grant
// being what is wanted but no more than the limit leaves, and reports both
// counts: so the instance knows exactly what it got. When there is no row
// yet the insert creates it with the grant; if another instance created it
// meanwhile, the conflict updates nothing (its count was not read under the
// lock) and the caller reserves again. A window is reserved only when every
// earlier one granted something or was not wanted, so a request the minute
// refuses uses up nothing of the hour; rows are always locked in window
// order, as the counting statement writes them, so the statements cannot
// deadlock.
func (s Scheme) reserveSQL(ws *windowSet, src *Source) string {
	windows := ws.others
	n := len(windows)
	var b strings.Builder
	if src != nil {
		b.WriteString("WITH a AS (")
		b.WriteString(src.Subject)
		b.WriteString(")")
	} else {
		fmt.Fprintf(&b, "WITH a AS (SELECT $1::%s AS id", s.IDType)
		if len(s.Classes) > 0 {
			fmt.Fprintf(&b, ", $%d::text AS %s", 2+3*n, s.ClassColumn)
		}
		b.WriteString(")")
	}
	var out []string
	for i, w := range windows {
		start, end, want := 2*i+2, 2*i+3, 2*n+2+i
		key := fmt.Sprintf("'%s:' || a.id::text || ':%s'", s.Name, w.key())
		var limit strings.Builder
		if len(s.Classes) > 0 {
			fmt.Fprintf(&limit, "CASE a.%s", s.ClassColumn)
			for _, c := range s.Classes {
				fmt.Fprintf(&limit, " WHEN '%s' THEN %d", c, ws.of(c)[i].Limit)
			}
			fmt.Fprintf(&limit, " ELSE %d END", w.Limit)
		} else {
			fmt.Fprintf(&limit, "$%d::bigint", 2+3*n+i)
		}
		cond := fmt.Sprintf("$%d::bigint > 0", want)
		if i > 0 {
			cond += fmt.Sprintf(" AND ($%d::bigint = 0 OR EXISTS (SELECT 1 FROM i%d))", want-1, i-1)
		}
		fmt.Fprintf(&b, ", c%d AS (SELECT r.count FROM rate_limit_counters r, a WHERE %s"+
			" AND r.key = %s AND r.window_start = $%d::bigint FOR UPDATE OF r)", i, cond, key, start)
		fmt.Fprintf(&b, ", i%d AS (INSERT INTO rate_limit_counters (key, window_start, count, expires_at)"+
			" SELECT %s, $%d::bigint, COALESCE(c.count + LEAST($%d::bigint, GREATEST((%s) - c.count, 0)),"+
			" LEAST($%d::bigint, %s)), $%d::bigint FROM a LEFT JOIN c%d c ON true WHERE %s"+
			" ON CONFLICT (key, window_start) DO UPDATE SET count = excluded.count"+
			" WHERE EXISTS (SELECT 1 FROM c%d) AND excluded.count > rate_limit_counters.count RETURNING count)",
			i, key, start, want, limit.String(), want, limit.String(), end, i, cond, i)
		out = append(out, fmt.Sprintf("(SELECT count FROM c%d)", i), fmt.Sprintf("(SELECT count FROM i%d)", i),
			fmt.Sprintf("(SELECT count FROM rate_limit_counters WHERE key = %s AND window_start = $%d::bigint)", key, start))
	}
	// As in the counting statement: the counters need no durability.
	b.WriteString(", " + asyncCTE + " SELECT ")
	if src != nil {
		for _, c := range src.Columns {
			b.WriteString(c + ", ")
		}
	}
	b.WriteString(strings.Join(out, ", "))
	b.WriteString(" FROM a CROSS JOIN async")
	if src != nil && src.Join != "" {
		b.WriteString(" " + src.Join)
	}
	return b.String()
}

// leaseCounts is what a reservation statement answers for each window (see
// reserveSQL): the counter locked, after reserving, and in the snapshot.
type leaseCounts [maxWindows]struct{ locked, after, seen sql.NullInt64 }

func countsOf(ints []sql.NullInt64) leaseCounts {
	var res leaseCounts
	for i := range len(ints) / 3 {
		res[i].locked, res[i].after, res[i].seen = ints[3*i], ints[3*i+1], ints[3*i+2]
	}
	return res
}

// reserveArgs are the arguments of a reservation of st's wants: first is
// $1; class, when the subject is given by id, the scheme's class parameter.
func (l *Limit[K]) reserveArgs(first any, st leaseStep, byID bool) []any {
	windows := l.windows.of(st.class)
	n := len(windows)
	args := make([]any, 0, 2+4*n)
	args = append(args, first)
	for i, w := range windows {
		args = append(args, st.starts[i], st.starts[i]+w.Seconds)
	}
	for i := range n {
		args = append(args, st.want[i])
	}
	switch {
	case len(l.scheme.Classes) == 0:
		for _, w := range windows {
			args = append(args, int64(w.Limit))
		}
	case byID:
		args = append(args, st.class)
	}
	return args
}

// reserve makes the reservation st asks for, for sub (by id).
func (l *Limit[K]) reserve(ctx context.Context, sub Subject[K], st leaseStep) (leaseCounts, error) {
	st.class = sub.Class
	var ints [3 * maxWindows]sql.NullInt64
	counts := ints[:3*len(l.windows.of(st.class))]
	rows, err := l.lim.pg.db.QueryCached(ctx, l.stmts.Reserve, l.reserveArgs(sub.ID, st, true)...)
	if err == nil {
		err = scanCounts(rows, counts)
	}
	if err != nil {
		return leaseCounts{}, fmt.Errorf("rate limit: reserving: %w", err)
	}
	return countsOf(counts), nil
}

// reserveByCredential makes the reservation st asks for, reading the
// subject by c in the same statement.
func (l *Limit[K]) reserveByCredential(ctx context.Context, c Credential[K], st leaseStep) (Subject[K], leaseCounts, error) {
	var ints [3 * maxWindows]sql.NullInt64
	counts := ints[:3*len(l.windows.of(st.class))]
	sub, err := c.Read(ctx, l.stmts.ReserveByCredential, l.reserveArgs(nil, st, false), counts)
	if err != nil {
		if !errors.Is(err, c.Unknown()) {
			err = fmt.Errorf("rate limit: reserving: %w", err)
		}
		return sub, leaseCounts{}, err
	}
	return sub, countsOf(counts), nil
}

// scanCounts reads the one row of a reservation by id and closes rows.
func scanCounts(rows *sql.Rows, counts []sql.NullInt64) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	dest := make([]any, len(counts))
	for i := range counts {
		dest[i] = &counts[i]
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Err()
}
