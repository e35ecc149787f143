// Package redact keeps the secrets that configuration carries in URLs out of
// everything the service prints: logs, errors, answers.
//
// An RPC provider's URL is a credential: Alchemy and Infura put the API key
// in the path (/v2/<key>, /v3/<key>), Helius and dRPC in the query
// (?api-key=<key>, ?dkey=<key>), others in the userinfo (https://user:pass@).
// URL is the one function that turns such a URL into one that can be shown.
//
// Hiding the URL where the service prints it is not enough: the RPC
// libraries put the URL they were given into their own errors (net/http's
// `Post "<url>": dial tcp ...`, solana-go's `rpc call getSlot() on <url>`),
// and those errors reach logs, River's job records and answers. HTTPClient
// therefore gives the libraries the redacted URL and an *http.Client whose
// transport sends every request to the real one: no error they build can
// hold what they never had. Where a library must hold the real URL (the
// database driver), Error hides it in the errors it returns.
package redact

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Mask stands in for every hidden part.
const Mask = "***"

// keptSegment is a path segment shown as is: a short lowercase word, maybe
// hyphenated, maybe with a version number (v2, v3, eth, solana, rpc,
// mainnet-beta). Anything else may be a key. Real keys are long, mixed case,
// hex, base58 or UUIDs; none of those fits.
var keptSegment = regexp.MustCompile(`^[a-z]+([-_][a-z]+)*[0-9]{0,2}$`)

// maxKeptSegment is the longest segment shown.
const maxKeptSegment = 16

// URL is raw with its credentials hidden: the userinfo becomes ***, every
// query value ***, every path segment that is not a short lowercase word
// ***, and the fragment is dropped. Scheme, host and port stay, so the
// operator can still tell which endpoint is meant. A value that does not
// parse as a URL is hidden whole.
func URL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return Mask
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme)
		b.WriteString(":")
	}
	if u.Host != "" || u.User != nil || u.Scheme != "" {
		b.WriteString("//")
	}
	if u.User != nil {
		b.WriteString(Mask)
		b.WriteString("@")
	}
	b.WriteString(u.Host)
	b.WriteString(redactPath(u.EscapedPath()))
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?")
		b.WriteString(redactQuery(u.RawQuery))
	}
	return b.String()
}

func redactPath(p string) string {
	if p == "" {
		return ""
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if s != "" && (len(s) > maxKeptSegment || !keptSegment.MatchString(s)) {
			segs[i] = Mask
		}
	}
	return strings.Join(segs, "/")
}

// redactQuery keeps the parameter names (they say which key it is) and
// hides every value. A name is not a secret, but one that does not read as
// a plain name is hidden too.
func redactQuery(q string) string {
	if q == "" {
		return ""
	}
	parts := strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		if len(name) > maxKeptSegment || !keptSegment.MatchString(strings.ToLower(name)) {
			name = Mask
		}
		parts[i] = name + "=" + Mask
	}
	return strings.Join(parts, "&")
}

var errNotURL = errors.New("not a valid URL")

// Error is err with raw's secrets hidden from its message: raw itself (as
// is or escaped, as url.Error quotes it) shows as URL(raw), and its
// userinfo, password, query values and the path segments URL hides as ***
// wherever else they show.
// errors.Is and errors.As still see err. Nil stays nil.
func Error(err error, raw string) error {
	if err == nil || raw == "" {
		return err
	}
	msg := err.Error()
	shown := URL(raw)
	msg = strings.ReplaceAll(msg, raw, shown)
	if q := strconv.Quote(raw); q[1:len(q)-1] != raw {
		msg = strings.ReplaceAll(msg, q[1:len(q)-1], shown)
	}
	for _, s := range secretsOf(raw) {
		msg = strings.ReplaceAll(msg, s, Mask)
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// secretsOf lists the parts of raw that must not show, longest first so
// that a part is not hidden before the whole that holds it.
func secretsOf(raw string) []string {
	var out []string
	if u, err := url.Parse(raw); err == nil {
		if u.User != nil {
			out = append(out, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
		for _, vs := range u.Query() {
			out = append(out, vs...)
		}
		for _, seg := range strings.Split(u.EscapedPath(), "/") {
			if redactPath(seg) == Mask {
				out = append(out, seg)
			}
		}
	}
	// Whether or not raw parses, and however: hide whatever could stand
	// where a userinfo would, up to any @ (an unescaped #, / or @ in a
	// password makes url.Parse, and drivers, read it as something else).
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		for at := range len(rest) {
			if rest[at] != '@' {
				continue
			}
			userinfo := rest[:at]
			out = append(out, userinfo)
			if _, pass, ok := strings.Cut(userinfo, ":"); ok {
				out = append(out, pass)
			}
		}
	}
	kept := out[:0]
	for _, s := range out {
		if len(s) >= 3 {
			kept = append(kept, s)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return len(kept[i]) > len(kept[j]) })
	return kept
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// HTTPClient is what an HTTP JSON-RPC client library should be built with
// for raw, a URL that may carry credentials: dial is URL(raw), the URL to
// give the library; client sends each of its requests to raw instead (raw's
// userinfo as basic auth), over base (nil: a clone of
// http.DefaultTransport). Redirects are not followed: the transport would
// send them back to raw.
func HTTPClient(raw string, base http.RoundTripper) (dial string, client *http.Client, err error) {
	real, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes raw.
		return "", nil, errNotURL
	}
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	t := &endpoint{real: real, base: base}
	if real.User != nil {
		t.user = real.User.Username()
		t.pass, _ = real.User.Password()
		t.hasUser = true
		stripped := *real
		stripped.User = nil
		t.real = &stripped
	}
	return URL(raw), &http.Client{
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// endpoint sends every request to one URL, whatever URL the request holds.
type endpoint struct {
	real       *url.URL
	user, pass string
	hasUser    bool
	base       http.RoundTripper
}

func (e *endpoint) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	u := *e.real
	r.URL = &u
	r.Host = ""
	if e.hasUser {
		// Replaces the Authorization net/http made of the redacted URL's ***.
		r.SetBasicAuth(e.user, e.pass)
	}
	return e.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach base.
func (e *endpoint) CloseIdleConnections() {
	if c, ok := e.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
