package agentpay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/cardissuer"
	"agentpay/cardissuer/sandbox"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/transfer"
	"agentpay/ent/user"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
)

// cardEnv is a sendEnv with the sandbox issuer, a stub clock and a
// queue for the request's mail.
type cardEnv struct {
	*sendEnv
	clock  *clock.Stub
	issuer *sandbox.Issuer
}

func startCardEnv(t *testing.T) *cardEnv {
	t.Helper()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}, BlockTime: 50 * time.Millisecond, Jobs: true})
	clk := clock.NewStub(time.Now())
	is := sandbox.New()
	svc := newTestService(t, env, Config{AgentMode: ModeTest, Clock: clk, CardIssuer: is})
	return &cardEnv{sendEnv: &sendEnv{env: env, svc: svc, db: env.DB}, clock: clk, issuer: is}
}

// pairedAgent is an agent funded with usdc on base, paired with a human
// whose identity is verified (or not).
func (e *cardEnv) pairedAgent(t *testing.T, usdc string, verified bool) (*ent.Agent, *ent.User) {
	t.Helper()
	ctx := context.Background()
	a := e.register(t, "buyer")
	if usdc != "" {
		e.fund(t, a, chains.Base, usdc)
	}
	name := randomName(t, "hum")
	u, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	if verified {
		// Before the pairing: its approval sets the agent's trust input.
		u = e.verify(t, u)
	}
	p, err := e.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = e.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	return e.agent(t, a), u
}

// verify marks the user's identity verified, as the provider's callback
// would (human_identity_test.go tests that path).
func (e *cardEnv) verify(t *testing.T, u *ent.User) *ent.User {
	t.Helper()
	ctx := context.Background()
	u, err := e.db.Ent.User.UpdateOne(u).SetIdentityStatus(user.IdentityStatusVerified).Save(ctx)
	require.NoError(t, err)
	return u
}

func (e *cardEnv) request(t *testing.T, a *ent.Agent, amount string) *CardRequestView {
	t.Helper()
	v, replayed, err := e.svc.RequestCardPurchase(context.Background(), a, CardPurchaseRequest{AmountUSD: dec(amount), MerchantName: "Acme Books", Description: "a book"})
	require.NoError(t, err)
	require.False(t, replayed)
	return v
}

func (e *cardEnv) card(t *testing.T, r *ent.CardRequest) *ent.CardRequest {
	t.Helper()
	out, err := e.db.Ent.CardRequest.Get(context.Background(), r.ID)
	require.NoError(t, err)
	return out
}

func TestCardRequestRefusals(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	lone := e.register(t, "lone")
	unverifiedAgent, _ := e.pairedAgent(t, "5", false)
	good, u := e.pairedAgent(t, "5", true)
	req := func(amount string) CardPurchaseRequest {
		return CardPurchaseRequest{AmountUSD: dec(amount), MerchantName: "Acme", Description: "x"}
	}
	for _, tc := range []struct {
		name   string
		a      *ent.Agent
		req    CardPurchaseRequest
		want   error
		detail string
	}{
		{"no pairing", lone, req("1"), ErrForbidden, "no approved pairing"},
		{"not verified", unverifiedAgent, req("1"), ErrForbidden, "completed identity verification"},
		{"below minimum", good, req("0.49"), nil, "at least 0.50"},
		{"sub-cent", good, req("1.001"), nil, "whole cents"},
		{"over per-send", good, req("1000.01"), ErrForbidden, "per-send limit"},
		{"no merchant", good, CardPurchaseRequest{AmountUSD: dec("1")}, nil, "merchant_name"},
		{"short balance", good, req("6"), ErrInsufficientFunds, "needed"},
		{"bad user id", good, CardPurchaseRequest{AmountUSD: dec("1"), MerchantName: "A", UserID: "nope"}, nil, "user_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.RequestCardPurchase(ctx, tc.a, tc.req)
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			} else {
				var ve *ValidationError
				require.ErrorAs(t, err, &ve)
			}
			require.Contains(t, err.Error(), tc.detail)
		})
	}
	n, err := e.db.Ent.CardRequest.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "refusals record nothing")

	// Off without an issuer.
	off := newTestService(t, e.env, Config{AgentMode: ModeTest})
	_, _, err = off.RequestCardPurchase(ctx, good, req("1"))
	require.ErrorIs(t, err, ErrUnavailable)

	// Revoked: refused, and a pending request can no longer be approved.
	v := e.request(t, good, "1")
	pairings, err := e.svc.UserPairings(ctx, u)
	require.NoError(t, err)
	_, err = e.svc.DecidePairing(ctx, u, pairings[0].Pairing.ID.String(), RevokePairing)
	require.NoError(t, err)
	_, _, err = e.svc.RequestCardPurchase(ctx, good, req("1"))
	require.ErrorIs(t, err, ErrForbidden)
	_, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, v.Request.ID.String(), "", nil)
	require.ErrorIs(t, err, ErrForbidden)
	require.Equal(t, cardrequest.StatusPendingApproval, e.card(t, v.Request).Status, "nothing reserved")
}

func TestCardRequestPicksTheHuman(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	a, u1 := e.pairedAgent(t, "5", true)
	name := randomName(t, "hum")
	u2, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	p, err := e.svc.RequestPairing(ctx, a, PairingRequest{UserID: u2.ID.String()})
	require.NoError(t, err)
	_, err = e.svc.DecidePairing(ctx, u2, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	_, err = e.svc.DecidePairingConsent(ctx, u1, p.Pairing.ID.String(), ApprovePairing) // the agent's first human lets u2 in
	require.NoError(t, err)
	// u2 is not verified: u1 is the one.
	v := e.request(t, a, "1")
	require.Equal(t, u1.ID, v.Request.UserID)
	e.verify(t, u2)
	_, _, err = e.svc.RequestCardPurchase(ctx, a, CardPurchaseRequest{AmountUSD: dec("1"), MerchantName: "A"})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve, "ambiguous without user_id")
	v, _, err = e.svc.RequestCardPurchase(ctx, a, CardPurchaseRequest{AmountUSD: dec("1"), MerchantName: "A", UserID: u2.ID.String()})
	require.NoError(t, err)
	require.Equal(t, u2.ID, v.Request.UserID)
	require.Equal(t, u2.Username, v.Username)
}

func TestCardRequestIdempotent(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	a, _ := e.pairedAgent(t, "5", true)
	key := "k-1"
	req := CardPurchaseRequest{AmountUSD: dec("2"), MerchantName: "Acme", Description: "x", IdempotencyKey: &key}
	first, replayed, err := e.svc.RequestCardPurchase(ctx, a, req)
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := e.svc.RequestCardPurchase(ctx, a, req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Request.ID, again.Request.ID)
	req.AmountUSD = dec("3")
	_, _, err = e.svc.RequestCardPurchase(ctx, a, req)
	require.ErrorIs(t, err, ErrIdempotencyKeyReused)
}

// The whole way: request (mail and event to the human), approve (the
// amount moves to the treasury), read the card once, charge part of it,
// the rest returns on chain; a second charge is declined.
func TestCardPurchaseChargeAndReturn(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	a, u := e.pairedAgent(t, "10", true)
	wallet := e.wallet(t, a, chains.Base)
	treasury := e.treasuryAddress(chains.Base)
	treasuryBefore := e.onChain(t, chains.Base, treasury)

	v := e.request(t, a, "4.00")
	require.Equal(t, CardPendingApproval, v.Status())
	evs := e.userEvents(t, u)
	require.Equal(t, EventCardRequested, evs[len(evs)-1].Kind)
	mails, err := e.db.Ent.MailMessage.Query().All(ctx)
	require.NoError(t, err)
	found := false
	for _, m := range mails {
		found = found || m.To == u.Email
	}
	require.True(t, found, "the human is mailed")

	lim, err := e.svc.Limits(ctx, a)
	require.NoError(t, err)
	require.True(t, lim.CardPurchases)

	got, err := e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, v.Request.ID.String(), "", nil)
	require.NoError(t, err)
	require.Equal(t, CardApproved, got.Status())
	require.NotNil(t, got.Request.CardToken)
	require.Regexp(t, `^ctok_[0-9A-Za-z]{32}$`, *got.Request.CardToken)
	requireDecimal(t, "6", e.onChain(t, chains.Base, wallet), "the amount left the agent's wallet")
	requireDecimal(t, "4", e.onChain(t, chains.Base, treasury).Sub(treasuryBefore), "to the treasury")
	row := e.card(t, got.Request)
	require.NotNil(t, row.CardSealed)
	require.NotNil(t, row.ReserveTransferID)
	requireTransferKind(t, e.db, e.db.Ent.Transfer.GetX(ctx, *row.ReserveTransferID), transfer.KindCardReservation)
	require.NotContains(t, string(*row.CardSealed), row.CardLast4+"\"", "sealed")

	// Read once.
	first, err := e.svc.AgentCardRequest(ctx, a, v.Request.ID.String())
	require.NoError(t, err)
	require.NotNil(t, first.Details)
	require.True(t, cardissuer.Luhn(first.Details.Number))
	require.Equal(t, first.Details.Number[12:], first.Request.CardLast4)
	second, err := e.svc.AgentCardRequest(ctx, a, v.Request.ID.String())
	require.NoError(t, err)
	require.Nil(t, second.Details, "shown once")
	require.Equal(t, first.Request.CardLast4, second.Request.CardLast4)

	d := first.Details
	present := sandbox.Presented{Number: d.Number, ExpMonth: d.ExpMonth, ExpYear: d.ExpYear, CVC: d.CVC}
	charge := func(amount, merchant string) *CardCharge {
		t.Helper()
		ref, decline := e.issuer.Find(present, e.clock.Now())
		if decline != "" {
			return declined(decline)
		}
		c, err := e.svc.AuthorizeCardCharge(ctx, sandbox.Name, ref, dec(amount), merchant)
		require.NoError(t, err)
		return c
	}
	require.Contains(t, charge("4.01", "Acme Books").Reason, "over the card's maximum")
	require.Contains(t, charge("1", "Other Shop").Reason, "merchant not allowed")
	c := charge("2.50", "acme books")
	require.True(t, c.Approved, c.Reason)
	requireDecimal(t, "1.5", c.Returned)
	require.Equal(t, "card closed", charge("1", "Acme Books").Reason, "single use")
	// And the service declines too, whatever the network does.
	c2, err := e.svc.AuthorizeCardCharge(ctx, sandbox.Name, *row.CardReference, dec("1"), "Acme Books")
	require.NoError(t, err)
	require.Equal(t, "card already used", c2.Reason)

	row = e.card(t, got.Request)
	require.Equal(t, cardrequest.StatusUsed, row.Status)
	require.True(t, row.CardSealed == nil || len(*row.CardSealed) == 0, "the details are gone once used")
	require.NotNil(t, row.RefundedAt, "the return was included")
	requireDecimal(t, "7.5", e.onChain(t, chains.Base, wallet), "the remainder is back")
	requireDecimal(t, "2.5", e.onChain(t, chains.Base, treasury).Sub(treasuryBefore), "the treasury keeps what was charged")

	var kinds []string
	agentEvents, err := e.svc.AccountEvents(ctx, AgentParty(a.ID), 0, nil)
	require.NoError(t, err)
	for _, ev := range agentEvents {
		if len(ev.Kind) > 5 && ev.Kind[:5] == "card." {
			kinds = append(kinds, ev.Kind)
			require.NotContains(t, string(ev.Data), d.Number, "no event carries the number")
		}
	}
	require.Equal(t, []string{EventCardApproved, EventCardIssued, EventCardCharged, EventCardReturned}, kinds)

	// The job finds nothing left to do.
	st, err := e.svc.CardsTick(ctx)
	require.NoError(t, err)
	require.Equal(t, CardsTickStats{}, st)
}

func TestCardDenyAndExpire(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	a, u := e.pairedAgent(t, "10", true)
	wallet := e.wallet(t, a, chains.Base)
	denied := e.request(t, a, "1")
	_, err := e.svc.DenyCardRequest(ctx, &Viewer{User: u}, denied.Request.ID.String())
	require.NoError(t, err)
	_, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, denied.Request.ID.String(), "", nil)
	require.ErrorIs(t, err, ErrConflict)

	lapsing := e.request(t, a, "1")
	e.clock.Advance(DefaultCardRequestTTL)
	_, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, lapsing.Request.ID.String(), "", nil)
	require.ErrorIs(t, err, ErrConflict)
	require.Contains(t, err.Error(), "expired")
	st, err := e.svc.CardsTick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Expired)
	require.Equal(t, cardrequest.StatusExpired, e.card(t, lapsing.Request).Status)
	require.Equal(t, cardrequest.StatusDenied, e.card(t, denied.Request).Status)
	requireDecimal(t, "10", e.onChain(t, chains.Base, wallet), "nothing reserved")

	// An issued card that is never charged expires and its money returns.
	unused := e.request(t, a, "3")
	_, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, unused.Request.ID.String(), "", nil)
	require.NoError(t, err)
	requireDecimal(t, "7", e.onChain(t, chains.Base, wallet))
	e.clock.Advance(MaxCardLifetime)
	ref := *e.card(t, unused.Request).CardReference
	c, err := e.svc.AuthorizeCardCharge(ctx, sandbox.Name, ref, dec("1"), "Acme Books")
	require.NoError(t, err)
	require.Equal(t, "card expired", c.Reason)
	st, err = e.svc.CardsTick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.ExpiredUnused)
	require.Equal(t, 1, st.Returned)
	row := e.card(t, unused.Request)
	require.Equal(t, cardrequest.StatusExpiredUnused, row.Status)
	require.NotNil(t, row.RefundedAt)
	requireDecimal(t, "10", e.onChain(t, chains.Base, wallet), "all of it back")
	st, err = e.svc.CardsTick(ctx)
	require.NoError(t, err)
	require.Equal(t, CardsTickStats{}, st, "idempotent")
}

// Approvals racing each other and the expiry reserve at most once.
func TestCardApprovalRaces(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	a, u := e.pairedAgent(t, "10", true)
	wallet := e.wallet(t, a, chains.Base)
	reserved := func(r *ent.CardRequest) int {
		n, err := e.db.Ent.Transfer.Query().Count(ctx)
		require.NoError(t, err)
		return n
	}

	t.Run("double approve", func(t *testing.T) {
		v := e.request(t, a, "2")
		before := reserved(v.Request)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, v.Request.ID.String(), "", nil)
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				require.ErrorIs(t, err, ErrConflict)
			}
		}
		require.Equal(t, 1, ok)
		require.Equal(t, before+1, reserved(v.Request), "one reservation")
		requireDecimal(t, "8", e.onChain(t, chains.Base, wallet))
	})

	t.Run("approve against expiry", func(t *testing.T) {
		v := e.request(t, a, "1")
		before := reserved(v.Request)
		// The expiry's deadline passes between the approval's checks and
		// its update: exactly one of the two moves happens.
		e.clock.Advance(DefaultCardRequestTTL - time.Millisecond)
		var wg sync.WaitGroup
		var approveErr, tickErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, approveErr = e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, v.Request.ID.String(), "", nil)
		}()
		go func() {
			defer wg.Done()
			e.clock.Advance(time.Millisecond)
			_, tickErr = e.svc.CardsTick(ctx)
		}()
		wg.Wait()
		require.NoError(t, tickErr)
		row := e.card(t, v.Request)
		switch row.Status {
		case cardrequest.StatusExpired:
			require.Error(t, approveErr)
			require.Equal(t, before, reserved(v.Request), "expired: nothing reserved")
		case cardrequest.StatusApproved:
			require.NoError(t, approveErr)
			require.Equal(t, before+1, reserved(v.Request), "approved: reserved once")
		default:
			t.Fatalf("status %s", row.Status)
		}
		t.Logf("the race went to %s", row.Status)
	})
}

// On Solana too: the reservation leaves the agent's Solana wallet for the
// treasury, and what the charge leaves unspent comes back from the
// treasury (its fixed reference, the treasury as fee payer).
func TestCardPurchaseReturnOnSolana(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	a, u := e.pairedAgent(t, "", true)
	e.fund(t, a, chains.Solana, "10")
	wallet := e.wallet(t, a, chains.Solana)
	treasury := e.treasuryAddress(chains.Solana)
	treasuryBefore := e.onChain(t, chains.Solana, treasury)

	v := e.request(t, a, "4.00")
	got, err := e.svc.ApproveCardRequest(ctx, &Viewer{User: u}, v.Request.ID.String(), "", nil)
	require.NoError(t, err)
	require.Equal(t, CardApproved, got.Status())
	requireDecimal(t, "6", e.onChain(t, chains.Solana, wallet), "reserved from the Solana wallet")

	first, err := e.svc.AgentCardRequest(ctx, a, v.Request.ID.String())
	require.NoError(t, err)
	d := first.Details
	ref, decline := e.issuer.Find(sandbox.Presented{Number: d.Number, ExpMonth: d.ExpMonth, ExpYear: d.ExpYear, CVC: d.CVC}, e.clock.Now())
	require.Empty(t, decline)
	c, err := e.svc.AuthorizeCardCharge(ctx, sandbox.Name, ref, dec("2.50"), "Acme Books")
	require.NoError(t, err)
	require.True(t, c.Approved, c.Reason)
	require.NotNil(t, e.card(t, got.Request).RefundedAt, "the return was included")
	requireDecimal(t, "7.5", e.onChain(t, chains.Solana, wallet), "the remainder is back")
	requireDecimal(t, "2.5", e.onChain(t, chains.Solana, treasury).Sub(treasuryBefore), "the treasury keeps what was charged")
}
