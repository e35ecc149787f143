package agentpay

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
)

func TestMemberRoleRule(t *testing.T) {
	for _, tc := range []struct {
		role                        MemberRole
		read, mutate, manageMembers bool
	}{
		{RoleOwner, true, true, true},
		{RoleReadOnly, true, false, false},
		{MemberRole("admin"), false, false, false},
		{MemberRole(""), false, false, false},
	} {
		t.Run(string(tc.role), func(t *testing.T) {
			require.Equal(t, tc.read, tc.role.May(ActionRead))
			require.Equal(t, tc.mutate, tc.role.May(ActionMutate))
			require.Equal(t, tc.manageMembers, tc.role.May(ActionManageMembers))
			auth := &MerchantAuth{Dashboard: &DashboardCaller{Role: tc.role}}
			if tc.mutate {
				require.NoError(t, auth.CheckMutate())
			} else {
				require.ErrorIs(t, auth.CheckMutate(), ErrForbidden)
			}
		})
	}
	require.NoError(t, (&MerchantAuth{}).CheckMutate(), "a secret key changes anything of its mode")
}

// viewer signs a user in (a browser session) and returns the viewer.
func (h *humansEnv) viewer(t testing.TB, u *ent.User) *Viewer {
	t.Helper()
	return signedIn(t, h.svc, u)
}

// signedIn opens a browser session of u on s, as a sign-in does.
func signedIn(t testing.TB, s *Service, u *ent.User) *Viewer {
	t.Helper()
	ctx := context.Background()
	var token string
	require.NoError(t, s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		var err error
		_, token, err = s.openBrowserSession(ctx, tx, u, "test", s.now().UTC())
		return err
	}))
	v, err := s.AuthenticateBrowser(ctx, token)
	require.NoError(t, err)
	return v
}

// merchantOf registers a merchant with a contact e-mail and confirms it
// from the confirmation link mailed to it.
func (h *humansEnv) merchantOf(t testing.TB, email string) *MerchantRegistration {
	t.Helper()
	reg := h.unconfirmedMerchantOf(t, email)
	_, err := h.svc.ConfirmMerchantEmail(context.Background(), h.merchantEmailToken(t, email))
	require.NoError(t, err)
	return reg
}

// unconfirmedMerchantOf registers a merchant whose contact e-mail is not
// confirmed yet.
func (h *humansEnv) unconfirmedMerchantOf(t testing.TB, email string) *MerchantRegistration {
	t.Helper()
	reg, err := h.svc.RegisterMerchant(context.Background(), MerchantInput{Name: strp("Shop " + email), Email: strp(email)})
	require.NoError(t, err)
	return reg
}

// merchantEmailToken is the token of the newest contact e-mail
// confirmation link mailed to an address.
func (h *humansEnv) merchantEmailToken(t testing.TB, to string) string {
	t.Helper()
	return h.mailedLink(t, strings.TrimSpace(to), "/confirm-email/")
}

func TestMerchantMembership(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	owner := h.user(t, "own")
	// The contact e-mail in other capitals still names the account.
	shop := h.merchantOf(t, strings.ToUpper(owner.Email)).Merchant
	other := h.merchantOf(t, "someone.else@example.com").Merchant
	ov := h.viewer(t, owner)

	// Owner by the contact e-mail, made lazily and once.
	for range 2 {
		ms, err := h.svc.MerchantsOf(ctx, ov)
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.Equal(t, shop.ID, ms[0].Merchant.ID)
		require.Equal(t, RoleOwner, ms[0].Role)
	}
	_, err := h.svc.MembershipOf(ctx, ov, other.ID)
	require.ErrorIs(t, err, ErrForbidden, "not a member of another merchant")
	_, err = h.svc.MembershipOf(ctx, ov, uuid.New())
	require.ErrorIs(t, err, ErrForbidden, "an unknown merchant answers the same")

	// An owner invites; the mail is queued with the invitation.
	reader := h.user(t, "read")
	inv, err := h.svc.InviteMember(ctx, ov, shop.ID, strings.ToUpper(reader.Email), RoleReadOnly)
	require.NoError(t, err)
	require.Equal(t, reader.Email, inv.Email)
	require.Nil(t, inv.UserID)
	mails := h.outbox(t, reader.Email)
	require.Len(t, mails, 1)
	require.Contains(t, mails[0].Text, h.svc.cfg.AppURL+"/dashboard")
	_, err = h.svc.InviteMember(ctx, ov, shop.ID, reader.Email, RoleOwner)
	require.ErrorIs(t, err, ErrConflict, "invited twice")
	_, err = h.svc.InviteMember(ctx, ov, shop.ID, owner.Email, RoleReadOnly)
	require.ErrorIs(t, err, ErrConflict, "the contact e-mail is the owner already")
	_, err = h.svc.InviteMember(ctx, ov, shop.ID, "x@example.com", MemberRole("admin"))
	require.True(t, IsValidation(err))
	_, err = h.svc.InviteMember(ctx, ov, other.ID, "x@example.com", RoleOwner)
	require.ErrorIs(t, err, ErrForbidden, "inviting to a merchant one does not manage")

	// The invitee accepts by signing in (asking for its merchants).
	rv := h.viewer(t, reader)
	ms, err := h.svc.MerchantsOf(ctx, rv)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, RoleReadOnly, ms[0].Role)
	require.NotNil(t, ms[0].Member.AcceptedAt)

	// A read-only member manages no members.
	_, err = h.svc.InviteMember(ctx, rv, shop.ID, "y@example.com", RoleReadOnly)
	require.ErrorIs(t, err, ErrForbidden)
	members, err := h.svc.MerchantMembers(ctx, rv, shop.ID)
	require.NoError(t, err, "but sees them")
	require.Len(t, members, 2)
	ownerRow := memberOf(t, h, ov, shop.ID, owner.Email)
	require.ErrorIs(t, h.svc.RemoveMember(ctx, rv, shop.ID, ownerRow.ID), ErrForbidden)

	// Owners remove members, never the contact e-mail's.
	require.ErrorIs(t, h.svc.RemoveMember(ctx, ov, shop.ID, ownerRow.ID), ErrConflict)
	require.ErrorIs(t, h.svc.RemoveMember(ctx, ov, shop.ID, uuid.New()), ErrNotFound)
	require.NoError(t, h.svc.RemoveMember(ctx, ov, shop.ID, inv.ID))
	ms, err = h.svc.MerchantsOf(ctx, rv)
	require.NoError(t, err)
	require.Empty(t, ms)
}

func TestDashboardSessions(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	owner := h.user(t, "own")
	reg := h.merchantOf(t, owner.Email)
	shop := reg.Merchant
	other := h.merchantOf(t, "other.shop@example.com").Merchant
	ov := h.viewer(t, owner)

	opened, err := h.svc.OpenDashboard(ctx, ov, shop.ID, ModeTest)
	require.NoError(t, err)
	require.Equal(t, RoleOwner, opened.Role)
	require.True(t, opened.ExpiresAt.After(h.svc.now()))
	require.False(t, opened.ExpiresAt.After(ov.Session.ExpiresAt), "never outlives its browser session")

	auth, err := h.svc.AuthenticateDashboard(ctx, opened.Token)
	require.NoError(t, err)
	require.Equal(t, shop.ID, auth.Merchant.ID)
	require.Equal(t, ModeTest, auth.Mode)
	require.Equal(t, RoleOwner, auth.Dashboard.Role)
	require.NoError(t, auth.CheckMutate())

	// As a test secret key: test sessions only, live keys out of reach.
	live, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	_, err = h.svc.CreateSession(ctx, live, SessionInput{Amount: decp("5.00"), Currency: "USD"})
	require.NoError(t, err)
	testSess, err := h.svc.CreateSession(ctx, auth, SessionInput{Amount: decp("6.00"), Currency: "USD", Metadata: map[string]any{"order": "A-17"}})
	require.NoError(t, err)
	page, err := h.svc.SessionsPage(ctx, auth, SessionFilter{}, PageArgs{}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, page.TotalCount)
	require.Equal(t, testSess.Session.ID, page.Edges[0].Node.ID)
	_, err = h.svc.RollMerchantKeys(ctx, auth, ModeLive)
	require.ErrorIs(t, err, ErrForbidden, "a test dashboard session rolls no live keys")
	rolled, err := h.svc.RollMerchantKeys(ctx, auth, ModeTest)
	require.NoError(t, err)
	require.NotEmpty(t, rolled.TestSecretKey)

	// Search by external id or a metadata value.
	for _, term := range []string{testSess.Session.ExternalID, "A-17"} {
		page, err = h.svc.SessionsPage(ctx, auth, SessionFilter{Search: &term}, PageArgs{}, nil)
		require.NoError(t, err)
		require.Equal(t, 1, page.TotalCount, term)
	}
	none := "A-18"
	page, err = h.svc.SessionsPage(ctx, auth, SessionFilter{Search: &none}, PageArgs{}, nil)
	require.NoError(t, err)
	require.Zero(t, page.TotalCount)

	// Not a member: nothing to open.
	_, err = h.svc.OpenDashboard(ctx, ov, other.ID, ModeTest)
	require.ErrorIs(t, err, ErrForbidden)
	_, err = h.svc.OpenDashboard(ctx, ov, shop.ID, Mode("prod"))
	require.True(t, IsValidation(err))
	_, err = h.svc.AuthenticateDashboard(ctx, "ds_nope")
	require.ErrorIs(t, err, ErrUnauthorized)

	// A read-only member's session: reads, and every change is refused.
	reader := h.user(t, "read")
	_, err = h.svc.InviteMember(ctx, ov, shop.ID, reader.Email, RoleReadOnly)
	require.NoError(t, err)
	rv := h.viewer(t, reader)
	ro, err := h.svc.OpenDashboard(ctx, rv, shop.ID, ModeLive)
	require.NoError(t, err)
	roAuth, err := h.svc.AuthenticateDashboard(ctx, ro.Token)
	require.NoError(t, err)
	require.Equal(t, ModeLive, roAuth.Mode)
	require.ErrorIs(t, roAuth.CheckMutate(), ErrForbidden)
	// The service refuses, whoever calls it (not only the GraphQL layer).
	_, err = h.svc.CreateSession(ctx, roAuth, SessionInput{Amount: decp("5.00"), Currency: "USD"})
	require.ErrorIs(t, err, ErrForbidden)
	_, err = h.svc.RollMerchantKeys(ctx, roAuth, ModeLive)
	require.ErrorIs(t, err, ErrForbidden)
	_, err = h.svc.UpdateMerchant(ctx, roAuth, MerchantInput{Name: new(string)})
	require.ErrorIs(t, err, ErrForbidden)
	_, err = h.svc.SendTestWebhook(ctx, roAuth)
	require.ErrorIs(t, err, ErrForbidden)

	// A merchantEvents watch opened with the session is open...
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	feed, err := h.svc.WatchMerchantEvents(watchCtx, roAuth, nil)
	require.NoError(t, err)

	// Removing the member ends its sessions at once, the watch within
	// DefaultCredentialRecheckInterval.
	require.NoError(t, h.svc.RemoveMember(ctx, ov, shop.ID, memberOf(t, h, ov, shop.ID, reader.Email).ID))
	_, err = h.svc.AuthenticateDashboard(ctx, ro.Token)
	require.ErrorIs(t, err, ErrUnauthorized)
	select {
	case _, open := <-feed:
		require.False(t, open, "no event was sent: the watch ends")
	case <-time.After(DefaultCredentialRecheckInterval + 5*time.Second):
		t.Fatal("the merchantEvents watch outlived the removed member's session")
	}
	// Invited again, the member opens new sessions; the old token stays
	// ended (revoked, not merely without a membership).
	_, err = h.svc.InviteMember(ctx, ov, shop.ID, reader.Email, RoleReadOnly)
	require.NoError(t, err)
	_, err = h.svc.OpenDashboard(ctx, rv, shop.ID, ModeLive)
	require.NoError(t, err)
	_, err = h.svc.AuthenticateDashboard(ctx, ro.Token)
	require.ErrorIs(t, err, ErrUnauthorized)

	// Signing the browser out ends the dashboard sessions opened from it.
	require.NoError(t, h.svc.SignOut(ctx, ov, false))
	_, err = h.svc.AuthenticateDashboard(ctx, opened.Token)
	require.ErrorIs(t, err, ErrUnauthorized)

	// And so does time.
	ov2 := h.viewer(t, owner)
	later, err := h.svc.OpenDashboard(ctx, ov2, shop.ID, ModeLive)
	require.NoError(t, err)
	h.env.Clock.Advance(DashboardSessionTTL + time.Second)
	_, err = h.svc.AuthenticateDashboard(ctx, later.Token)
	require.ErrorIs(t, err, ErrUnauthorized)
}

func TestPaymentVolumesRange(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	reg := h.merchantOf(t, "vol@example.com")
	auth, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	now := time.Now()
	vs, err := h.svc.PaymentVolumes(ctx, auth, now.Add(-24*time.Hour), now)
	require.NoError(t, err)
	require.Empty(t, vs)
	_, err = h.svc.PaymentVolumes(ctx, auth, now, now)
	require.True(t, IsValidation(err))
	_, err = h.svc.PaymentVolumes(ctx, auth, now.Add(-400*24*time.Hour), now)
	require.True(t, IsValidation(err))
}

// memberOf is the membership of an address in a merchant's list.
func memberOf(t *testing.T, h *humansEnv, v *Viewer, merchantID uuid.UUID, email string) *ent.MerchantMember {
	t.Helper()
	members, err := h.svc.MerchantMembers(context.Background(), v, merchantID)
	require.NoError(t, err)
	for _, m := range members {
		if m.Email == email {
			return m
		}
	}
	t.Fatalf("no member %s", email)
	return nil
}

// TestMemberInvitationsBounded: an owner's invite-remove-re-invite loop
// mails at most MemberInvitationsPerDay a day per merchant; the refused
// invitation records and mails nothing, another merchant's owners are not
// counted with it, and the next day invites again.
func TestMemberInvitationsBounded(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	owner := h.user(t, "loop")
	shop := h.merchantOf(t, owner.Email).Merchant
	ov := h.viewer(t, owner)
	const target = "target@example.com"
	invite := func() (*ent.MerchantMember, error) {
		return h.svc.InviteMember(ctx, ov, shop.ID, target, RoleReadOnly)
	}
	for range MemberInvitationsPerDay {
		mm, err := invite()
		require.NoError(t, err)
		require.NoError(t, h.svc.RemoveMember(ctx, ov, shop.ID, mm.ID))
	}
	require.Len(t, h.outbox(t, target), MemberInvitationsPerDay)

	_, err := invite()
	require.ErrorIs(t, err, ErrRateLimited)
	require.Contains(t, err.Error(), "20 invitations per day of one merchant")
	require.Len(t, h.outbox(t, target), MemberInvitationsPerDay, "no mail past the bound")
	members, err := h.svc.MerchantMembers(ctx, ov, shop.ID)
	require.NoError(t, err)
	require.Len(t, members, 1, "nothing recorded past the bound: the owner only")
	require.Equal(t, owner.Email, members[0].Email)

	other := h.user(t, "other")
	otherShop := h.merchantOf(t, other.Email).Merchant
	_, err = h.svc.InviteMember(ctx, h.viewer(t, other), otherShop.ID, target, RoleReadOnly)
	require.NoError(t, err, "each merchant has its own bound")

	h.env.Clock.Set(h.env.Clock.Now().Add(24 * time.Hour))
	ov = h.viewer(t, owner) // the browser session may have ended meanwhile
	_, err = invite()
	require.NoError(t, err, "the next day invites again")
}

// TestMerchantOwnerFollowsContactEmail: the owner lookup reads the key
// written with the contact e-mail, on registration and on every change of
// it, whatever its capitals; a new address owns the merchant once
// confirmed, and the previous one stops owning it at the change.
func TestMerchantOwnerFollowsContactEmail(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	first, second := h.user(t, "first"), h.user(t, "second")
	reg := h.merchantOf(t, "  "+strings.ToUpper(first.Email))
	auth, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	ownerOf := func(u *ent.User) bool {
		ms, err := h.svc.MerchantsOf(ctx, h.viewer(t, u))
		require.NoError(t, err)
		return len(ms) == 1 && ms[0].Merchant.ID == reg.Merchant.ID && ms[0].Role == RoleOwner
	}
	require.True(t, ownerOf(first))
	require.False(t, ownerOf(second))
	fv := h.viewer(t, first)
	ds, err := h.svc.OpenDashboard(ctx, fv, reg.Merchant.ID, ModeLive)
	require.NoError(t, err)

	m, err := h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp(strings.ToUpper(second.Email))})
	require.NoError(t, err)
	require.Equal(t, strings.ToUpper(second.Email), m.Email, "shown as written")
	require.Equal(t, second.Email, m.EmailNormalized)
	require.Nil(t, m.EmailVerifiedAt, "a new contact e-mail is unconfirmed")
	require.False(t, ownerOf(second), "not before its confirmation")
	require.False(t, ownerOf(first), "the previous address's ownership ended with the change")
	_, err = h.svc.AuthenticateDashboard(ctx, ds.Token)
	require.ErrorIs(t, err, ErrUnauthorized, "and its dashboard sessions")

	_, err = h.svc.ConfirmMerchantEmail(ctx, h.merchantEmailToken(t, second.Email))
	require.NoError(t, err)
	require.True(t, ownerOf(second), "the new contact e-mail owns it once confirmed")
	require.False(t, ownerOf(first))
}

// BenchmarkMerchantsOf is a dashboard read by an owner of 20 merchants,
// its memberships claimed already: what every dashboard request pays for
// the claim rule before it reads anything.
func BenchmarkMerchantsOf(b *testing.B) {
	h := startHumansEnv(b)
	ctx := context.Background()
	owner := h.user(b, "bench")
	for range 20 {
		h.merchantOf(b, owner.Email)
	}
	ov := h.viewer(b, owner)
	ms, err := h.svc.MerchantsOf(ctx, ov)
	require.NoError(b, err)
	require.Len(b, ms, 20)
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.svc.MerchantsOf(ctx, ov); err != nil {
			b.Fatal(err)
		}
	}
}
