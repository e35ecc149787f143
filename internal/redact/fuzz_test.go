package redact

// Seeds are in testdata/fuzz/<target>; `make fuzz` runs each target
// (docs/testing.md).

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// FuzzURL: the redacted form of a URL (an RPC URL from the environment)
// shows its scheme and host and nothing else of it but masks, short
// lowercase path words and parameter names: no userinfo, no query value, no
// other path segment. It parses as a URL of the same scheme and host, so
// an RPC library given it behaves the same.
func FuzzURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		got := URL(raw)
		u, err := url.Parse(raw)
		if err != nil || u.Opaque != "" {
			if raw != "" && got != Mask {
				t.Fatalf("%q does not parse, shown as %q", raw, got)
			}
			return
		}
		rest, ok := got, true
		if u.Scheme != "" {
			rest, ok = strings.CutPrefix(rest, u.Scheme+":")
		}
		if after, slashes := strings.CutPrefix(rest, "//"); ok && slashes {
			after = strings.TrimPrefix(after, Mask+"@")
			rest, ok = strings.CutPrefix(after, u.Host)
		}
		if !ok {
			t.Fatalf("%q shown as %q, not its scheme and host first", raw, got)
		}
		path, query, _ := strings.Cut(rest, "?")
		for _, seg := range strings.Split(path, "/") {
			if seg != "" && seg != Mask && !kept(seg) {
				t.Fatalf("%q shown as %q, with path segment %q", raw, got, seg)
			}
		}
		if query != "" {
			for _, p := range strings.Split(query, "&") {
				name, value, _ := strings.Cut(p, "=")
				if value != Mask || name != Mask && !kept(strings.ToLower(name)) {
					t.Fatalf("%q shown as %q, with parameter %q", raw, got, p)
				}
			}
		}
		back, err := url.Parse(got)
		if err != nil || back.Scheme != u.Scheme || back.Host != u.Host {
			t.Fatalf("%q shown as %q, which parses as %v (%v)", raw, got, back, err)
		}
	})
}

func kept(s string) bool { return len(s) <= maxKeptSegment && keptSegment.MatchString(s) }

// FuzzError: an error that quotes a database or RPC URL, parsable or not
// (whatever its host and path hold), or repeats its password, shows the
// password nowhere once through Error.
func FuzzError(f *testing.F) {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	f.Fuzz(func(t *testing.T, user, pass, host, path string) {
		// A user with URL syntax in it would make another password.
		if len(pass) < 3 || strings.Trim(pass, alnum) != "" || strings.Trim(user, alnum+"._-") != "" {
			return
		}
		raw := "postgres://" + user + ":" + pass + "@" + host + "/" + path
		if strings.Contains("postgres://"+user+"@"+host+"/"+path+" connecting refused for", pass) || strings.Contains(Mask, pass) {
			return // the password also stands elsewhere: nothing tells it apart
		}
		err := Error(fmt.Errorf("connecting %q: %s refused for %s", raw, raw, pass), raw)
		if strings.Contains(err.Error(), pass) {
			t.Fatalf("%q: %s", raw, err)
		}
	})
}
