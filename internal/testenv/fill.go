package testenv

import (
	"reflect"

	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

// Fill sets the zero fields of the agentpay.Config cfg points to from the
// Env: DB, Vault, Logger, Treasury, Families, Test, Jobs (the Env's, or an
// insert-only River client on cfg's own DB when the Env has none), Clock
// when the Env has one; BaseURL, PayURL and AppURL when all three are empty;
// PasskeyRPID and PasskeyOrigins (PasskeyRPID, AppURL) when both are
// empty, so passkeys work with an Authenticator;
// WebhookAllowPrivate on unless Options.PublicWebhooksOnly, since the
// tests' receivers (NewReceiver, httptest) listen on loopback.
// What the test set itself stays, so a test states only what it changes.
//
// cfg is taken as any, the fields found by name: testenv cannot import
// agentpay, whose own tests use it (an import cycle). A Config without one
// of these fields, or with one of another type, fails the test, so a
// renamed field cannot be skipped silently.
func (e *Env) Fill(cfg any) {
	e.tb.Helper()
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		e.tb.Fatalf("testenv: Fill takes a pointer to agentpay.Config, not %T", cfg)
		return
	}
	v = v.Elem()
	set := func(name string, value any) {
		f := v.FieldByName(name)
		if !f.IsValid() || !f.CanSet() {
			e.tb.Fatalf("testenv: %s has no settable field %s", v.Type(), name)
			return
		}
		val := reflect.ValueOf(value)
		if !val.Type().AssignableTo(f.Type()) {
			e.tb.Fatalf("testenv: %s.%s is a %s, not a %s", v.Type(), name, f.Type(), val.Type())
			return
		}
		if f.IsZero() {
			f.Set(val)
		}
	}
	if e.DB != nil {
		set("DB", e.DB)
	}
	set("Vault", e.Vault)
	set("Logger", e.Logger)
	set("Treasury", e.Treasury)
	set("Families", e.Families)
	set("Test", e.Test)
	var db *store.DB
	if f := v.FieldByName("DB"); f.IsValid() {
		db, _ = f.Interface().(*store.DB)
	}
	switch {
	case e.Jobs != nil:
		set("Jobs", e.Jobs)
	case db != nil && isZero(v, "Jobs"):
		// An Env without a database (NoDB) serving a test's own: the
		// service enqueues as an API process does (mail needs it).
		set("Jobs", testdb.InsertOnlyRiver(e.tb, db))
	}
	if e.Clock != nil {
		set("Clock", e.Clock)
	}
	if !e.opts.PublicWebhooksOnly {
		set("WebhookAllowPrivate", true)
	}
	if isZero(v, "BaseURL") && isZero(v, "PayURL") && isZero(v, "AppURL") {
		set("BaseURL", BaseURL)
		set("PayURL", PayURL)
		set("AppURL", AppURL)
	}
	if isZero(v, "PasskeyRPID") && isZero(v, "PasskeyOrigins") {
		set("PasskeyRPID", PasskeyRPID)
		set("PasskeyOrigins", []string{AppURL})
	}
}

// isZero reports whether v's field name is zero; a missing field counts as
// zero, so set reports it.
func isZero(v reflect.Value, name string) bool {
	f := v.FieldByName(name)
	return !f.IsValid() || f.IsZero()
}
