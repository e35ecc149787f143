package store

import (
	"context"
	"slices"

	"agentpay/ent"
)

// ChangeListener looks at an ent mutation before it runs and returns what
// to do once the change is committed, or nil when the change is none of its
// business. It must be quick: it runs on every mutation of the DB.
type ChangeListener func(m ent.Mutation) (onCommit func())

// changeListener is one OnChange registration (a pointer, so that it can be
// told apart when unregistered).
type changeListener struct{ f ChangeListener }

// OnChange registers l to hear of the changes committed through db.Ent:
// the onCommit that l returns for a mutation runs once the mutation has
// succeeded, at once outside a transaction and when the transaction
// commits inside one (never after a failed mutation or a rollback). The
// returned function unregisters l.
func (db *DB) OnChange(l ChangeListener) (unsubscribe func()) {
	reg := &changeListener{f: l}
	db.listenersMu.Lock()
	defer db.listenersMu.Unlock()
	list := append(slices.Clone(db.changeListeners()), reg)
	db.listeners.Store(&list)
	return func() {
		db.listenersMu.Lock()
		defer db.listenersMu.Unlock()
		list := slices.DeleteFunc(slices.Clone(db.changeListeners()), func(r *changeListener) bool { return r == reg })
		db.listeners.Store(&list)
	}
}

// changeListeners returns the registered listeners (never to be changed:
// OnChange replaces the slice).
func (db *DB) changeListeners() []*changeListener {
	if p := db.listeners.Load(); p != nil {
		return *p
	}
	return nil
}

// changeHook is the one ent hook of a DB (OpenDB installs it): it asks the
// listeners about each mutation before it runs and, once the mutation has
// succeeded, runs what they returned when it is committed.
func (db *DB) changeHook(next ent.Mutator) ent.Mutator {
	return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
		var onCommit []func()
		for _, l := range db.changeListeners() {
			if f := l.f(m); f != nil {
				onCommit = append(onCommit, f)
			}
		}
		v, err := next.Mutate(ctx, m)
		if err != nil || len(onCommit) == 0 {
			return v, err
		}
		committed := func() {
			for _, f := range onCommit {
				f()
			}
		}
		var tx *ent.Tx
		if tm, ok := m.(interface{ Tx() (*ent.Tx, error) }); ok {
			tx, _ = tm.Tx()
		}
		if tx == nil {
			committed()
			return v, nil
		}
		tx.OnCommit(func(next ent.Committer) ent.Committer {
			return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
				err := next.Commit(ctx, tx)
				if err == nil {
					committed()
				}
				return err
			})
		})
		return v, nil
	})
}
