// Package app serves the human app at APP_URL (docs/humans.md): the
// sign-in pages, which set and clear the browser session cookie, and the
// signed-in pages, which are a shell whose script reads and changes
// everything through the public GraphQL API (the viewer root and the
// viewerEvents subscription), so the app is also the reference for anyone
// building their own.
//
// The pages decide nothing: the service's rules (signin.go, pairings.go,
// invitations.go) do. What this package owns is the browser's side of
// them: the cookie's flags (HttpOnly, SameSite=Lax, Secure when APP_URL is
// https, path / since the script sends it to the GraphQL endpoint), and
// CSRF on its forms. Forms made
// before a session exists carry a double-submit token (a random value in
// a SameSite=Strict cookie and in the form); forms of a signed-in page
// carry the session's CSRF token, as the script's GraphQL requests do.
//
// The merchant dashboard (/dashboard, docs/dashboard.md) is one more such
// shell: its script opens a dashboard session with the viewer's cookie
// (openDashboard) and calls the merchant API with it, never with the
// cookie, so it is the reference for a merchant's own dashboard too.
//
// Reading a sign-in link (GET) only shows its page; the form on it spends
// the link (POST), so a mail scanner that opens links cannot.
//
// Every answer of the app carries one strict Content-Security-Policy
// (contentSecurityPolicy, set by the securityHeaders middleware for the
// whole router): scripts and styles from the app's own files only, no
// inline code (the templates give the scripts their settings in data-
// attributes), GraphQL on this origin only, never framed. A new page
// needs nothing to be covered, and must keep to it: its script is a file
// under static/.
//
// Passkey sign-in is the one script-driven step before a session exists:
// its begin and finish are endpoints here (JSON, with the pre-session form
// token), because finishing sets the HttpOnly cookie. Registering one, and
// the rest of the settings page, go through GraphQL as the home page does.
package app
