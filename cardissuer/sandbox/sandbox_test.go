package sandbox

import (
	"context"
	"testing"
	"time"

	"agentpay/cardissuer"
)

func TestIssueAndFind(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	is := New()
	req := cardissuer.IssueRequest{RequestID: "r1", MaxAmountCents: 1234, Merchant: "Shop", ExpiresAt: now.Add(24 * time.Hour)}
	c, err := is.Issue(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Number) != 16 || !cardissuer.Luhn(c.Number) || c.Number[:6] != testBIN {
		t.Fatalf("number %q: want a 16-digit Luhn-valid test number", c.Number)
	}
	again, err := is.Issue(ctx, req)
	if err != nil || again.Number != c.Number {
		t.Fatalf("the same request must answer the same card: %v", err)
	}
	if s := c.String(); s != "cardissuer.Card{"+c.Reference+", ****"+c.Last4()+"}" {
		t.Fatalf("String leaks: %s", s)
	}
	good := Presented{Number: c.Number, ExpMonth: c.ExpMonth, ExpYear: c.ExpYear, CVC: c.CVC}
	for _, tc := range []struct {
		name    string
		p       Presented
		at      time.Time
		decline string
	}{
		{"good", good, now, ""},
		{"unknown", Presented{Number: "4000000000000002", ExpMonth: c.ExpMonth, ExpYear: c.ExpYear, CVC: c.CVC}, now, "unknown card number"},
		{"wrong cvc", Presented{Number: c.Number, ExpMonth: c.ExpMonth, ExpYear: c.ExpYear, CVC: "xyz"}, now, "wrong CVC"},
		{"wrong expiry", Presented{Number: c.Number, ExpMonth: c.ExpMonth%12 + 1, ExpYear: c.ExpYear, CVC: c.CVC}, now, "wrong expiry date"},
		{"expired", good, now.Add(25 * time.Hour), "card expired"},
	} {
		ref, decline := is.Find(tc.p, tc.at)
		if decline != tc.decline || (decline == "" && ref != c.Reference) {
			t.Errorf("%s: got %q %q, want decline %q", tc.name, ref, decline, tc.decline)
		}
	}
	if err := is.Close(ctx, c.Reference); err != nil {
		t.Fatal(err)
	}
	if _, decline := is.Find(good, now); decline != "card closed" {
		t.Fatalf("closed card: %q", decline)
	}
}

func TestLuhn(t *testing.T) {
	for number, want := range map[string]bool{
		"4242424242424242": true, "4000056655665556": true, "4242424242424241": false, "42424242": false, "42424242424242x2": false,
	} {
		if got := cardissuer.Luhn(number); got != want {
			t.Errorf("Luhn(%s) = %v", number, want)
		}
	}
}
