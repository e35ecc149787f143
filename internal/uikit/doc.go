// Package uikit holds the one stylesheet of every page people see: the
// app, the merchant dashboard (both under app/) and the hosted checkout
// page (web/). Each serves the same bytes at its own /assets/ui.css, so
// each page's Content-Security-Policy (style-src 'self') still allows it
// with no other origin; a button, an input, a table, a notice, an empty
// state or a confirmation looks and behaves the same on all of them.
//
// ui.css is written in layers: design tokens (custom properties the
// hosted page overrides with the merchant's brand), base elements,
// components, then each surface's own layout (.app for the app and the
// dashboard, .checkout for the hosted page), then the phone layout.
// docs/humans.md#the-app lists the components.
package uikit

import (
	"bytes"
	_ "embed"
	"net/http"
	"time"
)

//go:embed ui.css
var css []byte

// Path is where a surface serves the stylesheet, under its own prefix.
const Path = "/assets/ui.css"

// builtAt is the Last-Modified of the stylesheet: the process start, as
// the bytes are the binary's own.
var builtAt = time.Now().UTC().Truncate(time.Second)

// Stylesheet answers GET for ui.css (and HEAD, and If-Modified-Since):
// text/css, never sniffed, cached for an hour like the pages' other
// assets.
func Stylesheet(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "ui.css", builtAt, bytes.NewReader(css))
}
