package webhook

// Fuzz targets of what a webhook receiver reads (signature headers) and of
// the webhook URL host check. Seeds are in testdata/fuzz/<target>; `make
// fuzz` runs each target (docs/testing.md).

import (
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzVerifyStandard: whatever the headers, VerifyStandard answers one of
// its three errors or nil, and nil only when a webhook-signature entry is
// the v1 signature of the received id, timestamp and body under the secret,
// with the timestamp within the tolerance. The signatures SetSignatureHeaders
// makes verify under the current secret and, during a rotation, under the
// previous one, and fail on any other body.
func FuzzVerifyStandard(f *testing.F) {
	now := time.Unix(1_900_000_000, 0)
	f.Fuzz(func(t *testing.T, secret, id, timestamp, signatures string, body []byte, skew int64, previous string) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, timestamp)
		h.Set(HeaderSignature, signatures)
		err := VerifyStandard(secret, h, body, 0, now)
		if err != nil && !errors.Is(err, ErrNoSignature) && !errors.Is(err, ErrSignature) && !errors.Is(err, ErrTimestamp) {
			t.Fatalf("unexpected error %v", err)
		}
		if err == nil {
			id, ts := h.Get(HeaderID), h.Get(HeaderTimestamp)
			sec, perr := strconv.ParseInt(ts, 10, 64)
			if perr != nil || now.Sub(time.Unix(sec, 0)).Abs() > DefaultTolerance {
				t.Fatalf("accepted timestamp %q", ts)
			}
			want := standardSignature(secret, id, ts, body)
			found := false
			for _, s := range strings.Fields(h.Get(HeaderSignature)) {
				found = found || s == want
			}
			if !found {
				t.Fatalf("accepted %q, which holds no valid signature", h.Get(HeaderSignature))
			}
		}

		at := now.Add(time.Duration(skew%600) * time.Second)
		signed := http.Header{}
		var rotating []string
		if previous != "" {
			rotating = append(rotating, previous)
		}
		SetSignatureHeaders(signed, secret, id, at, body, rotating...)
		if h := signed.Get(HeaderID); h != id {
			// A header value cannot hold every string; nothing to verify.
			return
		}
		err = VerifyStandard(secret, signed, body, 0, now)
		inTolerance := now.Sub(at).Abs() <= DefaultTolerance
		if id == "" {
			if !errors.Is(err, ErrNoSignature) {
				t.Fatalf("no id: %v", err)
			}
		} else if (err == nil) != inTolerance {
			t.Fatalf("own signature at skew %ds: %v", skew%600, err)
		}
		if err == nil && VerifyStandard(secret, signed, append(body, 'x'), 0, now) == nil {
			t.Fatal("a signature verified for another body")
		}
		if err == nil && previous != "" && VerifyStandard(previous, signed, body, 0, now) != nil {
			t.Fatal("a receiver holding the previous secret does not verify during the rotation")
		}
	})
}

// FuzzVerify: X-Checkout-Signature verifies exactly the hex HMAC of the
// body under the secret (in either case, surrounding space ignored).
func FuzzVerify(f *testing.F) {
	f.Fuzz(func(t *testing.T, secret string, body []byte, signature string) {
		err := Verify(secret, body, signature)
		want := Sign(secret, body)
		got := strings.ToLower(strings.TrimSpace(signature))
		if (err == nil) != (got == want) {
			t.Fatalf("Verify(%q) = %v, the signature is %s", signature, err, want)
		}
		if Verify(secret, body, want) != nil || Verify(secret, append(body, 0), want) == nil {
			t.Fatal("the body's own signature does not verify, or verifies another body")
		}
	})
}

// FuzzCheckPublicHost: a host CheckPublicHost lets through is not
// localhost and, when it is an IP literal in any form netip reads (mapped,
// zoned, upper case, trailing dot), a public unicast address.
func FuzzCheckPublicHost(f *testing.F) {
	f.Fuzz(func(t *testing.T, host string) {
		err := CheckPublicHost(host)
		var np *NonPublicAddrError
		if err != nil && !errors.Is(err, ErrLocalhost) && !errors.As(err, &np) {
			t.Fatalf("unexpected error %v", err)
		}
		if err != nil {
			return
		}
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if h == "localhost" || strings.HasSuffix(h, ".localhost") {
			t.Fatalf("let %q through", host)
		}
		ip, perr := netip.ParseAddr(h)
		if perr != nil {
			return
		}
		u := ip.Unmap()
		if u.IsLoopback() || u.IsPrivate() || u.IsUnspecified() || u.IsLinkLocalUnicast() || u.IsMulticast() ||
			u.IsLinkLocalMulticast() || u.IsInterfaceLocalMulticast() || u.Zone() != "" || !IsPublicAddr(ip) {
			t.Fatalf("let %q (%s) through", host, u)
		}
	})
}
