package store

// PerDB is a value each DB holds one of, made on first use and shared by
// every user of that DB (every Service on the pool): a pool's batcher, for
// instance, whose statements must be shared to be batched. Declare one per
// kind of value, at package level; the values live in the DBs.
type PerDB[T any] struct {
	newValue func(db *DB) T
	// closeValue, when not nil, releases a value when its DB closes.
	closeValue func(T)
}

// NewPerDB returns a value per DB made by newValue and released by
// closeValue (nil: nothing to release) when the DB closes.
func NewPerDB[T any](newValue func(db *DB) T, closeValue func(T)) *PerDB[T] {
	return &PerDB[T]{newValue: newValue, closeValue: closeValue}
}

// For returns db's value, making it on first use; concurrent first uses
// share one.
func (p *PerDB[T]) For(db *DB) T {
	if v, ok := db.values.Load(p); ok {
		return v.(T)
	}
	db.valuesMu.Lock()
	defer db.valuesMu.Unlock()
	if v, ok := db.values.Load(p); ok {
		return v.(T)
	}
	v := p.newValue(db)
	db.values.Store(p, v)
	if p.closeValue != nil {
		db.closers = append(db.closers, func() { p.closeValue(v) })
	}
	return v
}

// closeValues releases db's per-DB values, the last made first.
func (db *DB) closeValues() {
	db.valuesMu.Lock()
	closers := db.closers
	db.closers = nil
	db.valuesMu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}
