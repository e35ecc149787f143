package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"strings"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/dashboardsession"
	"agentpay/ent/merchant"
	"agentpay/ent/merchantmember"
	"agentpay/internal/ratelimit"
)

// Merchant members: the people who manage a merchant in the dashboard
// (docs/dashboard.md). The rule:
//
//   - A signed-in account whose verified e-mail is a merchant's confirmed
//     contact e-mail is that merchant's owner: both the account's address
//     and the merchant's contact address proved by a link e-mailed to it
//     (human_users.go, merchant_email.go), never by anything an agent or a
//     registrant could hold. Its membership is made lazily, the first time
//     the account asks for its merchants (MerchantsOf) or opens the
//     dashboard, and making it twice is harmless; it confers nothing once
//     the address is no longer the confirmed contact e-mail (roleOf), and
//     is removed when the e-mail changes.
//   - Owners invite more people by e-mail, as owners or read-only members.
//     The invitation's mail is queued in the transaction that records it;
//     the invitee signs in with the app's e-mail link and the invitation is
//     accepted as soon as an account with that verified e-mail asks.
//   - Owners remove members (never the confirmed contact e-mail's own
//     membership, which the first rule would make again). Read-only
//     members see everything of the merchant in the mode they open and
//     change nothing.

// MemberRole is what a member may do with a merchant.
type MemberRole string

// The roles.
const (
	RoleOwner    MemberRole = "owner"
	RoleReadOnly MemberRole = "read_only"
)

// MemberAction is something a member may or may not do (MemberRole.May).
type MemberAction string

// The actions the roles decide.
const (
	// ActionRead: see the merchant's sessions, payments, events, settings.
	ActionRead MemberAction = "read"
	// ActionMutate: any change through the merchant API (sessions,
	// refunds, settings, webhooks, keys).
	ActionMutate MemberAction = "mutate"
	// ActionManageMembers: invite and remove members.
	ActionManageMembers MemberAction = "manage_members"
)

// May is the role rule, the one place it is decided.
func (r MemberRole) May(a MemberAction) bool {
	switch r {
	case RoleOwner:
		return a == ActionRead || a == ActionMutate || a == ActionManageMembers
	case RoleReadOnly:
		return a == ActionRead
	}
	return false
}

// ErrReadOnlyMember is a read-only member trying to change something.
var ErrReadOnlyMember = fmt.Errorf("%w: a read-only member cannot change anything", ErrForbidden)

// errNotMember is a merchant the viewer does not manage: one answer
// whether or not the merchant exists.
var errNotMember = fmt.Errorf("%w: you are not a member of this merchant", ErrForbidden)

// MaxMerchantMembers bounds a merchant's members (invitations included),
// and so what an owner can make the service mail.
const MaxMerchantMembers = 50

// MemberInvitationsPerDay bounds the invitation mails one merchant's
// owners send per clock day (UTC), counted across instances: the member
// cap bounds who is invited at once, not an invite-remove-re-invite loop
// mailing an address over and over. Enough to set a team up in a day.
const MemberInvitationsPerDay = 20

// memberInvitationScheme counts each merchant's invitations
// (rateLimits.invitations).
var memberInvitationScheme = ratelimit.Scheme{
	Name: "member_invitations", IDType: "uuid",
	Windows: func(string) []ratelimit.Window {
		return []ratelimit.Window{{Name: "day", Seconds: 24 * 3600, Limit: MemberInvitationsPerDay}}
	},
}

// Membership is a merchant a viewer manages, in its role.
type Membership struct {
	Merchant *ent.Merchant
	Member   *ent.MerchantMember
	Role     MemberRole
}

// MerchantsOf is the merchants the viewer manages (active ones), by name:
// owned through the contact e-mail, or by an accepted invitation.
func (s *Service) MerchantsOf(ctx context.Context, v *Viewer) ([]Membership, error) {
	if err := s.claimMemberships(ctx, v.User); err != nil {
		return nil, err
	}
	members, err := s.cfg.DB.Ent.MerchantMember.Query().
		Where(merchantmember.UserID(v.User.ID), merchantmember.AcceptedAtNotNil()).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading memberships: %w", err)
	}
	ids := make([]uuid.UUID, len(members))
	for i, m := range members {
		ids[i] = m.MerchantID
	}
	ms, err := s.cfg.DB.Ent.Merchant.Query().
		Where(merchant.IDIn(ids...), merchant.Active(true)).
		Order(merchant.ByName(), merchant.ByID()).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchants: %w", err)
	}
	byMerchant := make(map[uuid.UUID]*ent.MerchantMember, len(members))
	for _, m := range members {
		byMerchant[m.MerchantID] = m
	}
	out := make([]Membership, 0, len(ms))
	for _, m := range ms {
		mm := byMerchant[m.ID]
		if role := roleOf(m, mm); role != "" {
			out = append(out, Membership{Merchant: m, Member: mm, Role: role})
		}
	}
	return out, nil
}

// MembershipOf is the viewer's membership of one merchant: errNotMember
// (ErrForbidden) when it has none, or the merchant is unknown; a
// deactivated merchant is ErrForbidden too.
func (s *Service) MembershipOf(ctx context.Context, v *Viewer, merchantID uuid.UUID) (*Membership, error) {
	if err := s.claimMemberships(ctx, v.User); err != nil {
		return nil, err
	}
	return s.acceptedMembership(ctx, v.User.ID, merchantID)
}

// acceptedMembership reads the accepted membership of a user of a
// merchant, without claiming anything.
func (s *Service) acceptedMembership(ctx context.Context, userID, merchantID uuid.UUID) (*Membership, error) {
	mm, err := s.cfg.DB.Ent.MerchantMember.Query().
		Where(merchantmember.MerchantID(merchantID), merchantmember.UserID(userID), merchantmember.AcceptedAtNotNil()).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, errNotMember
	}
	if err != nil {
		return nil, fmt.Errorf("reading membership: %w", err)
	}
	m, err := s.cfg.DB.Ent.Merchant.Get(ctx, merchantID)
	if err != nil {
		return nil, fmt.Errorf("reading merchant: %w", err)
	}
	role := roleOf(m, mm)
	if role == "" {
		return nil, errNotMember
	}
	if !m.Active {
		return nil, errMerchantDeactivated
	}
	return &Membership{Merchant: m, Member: mm, Role: role}, nil
}

// roleOf is a member's role: the confirmed contact e-mail is the owner
// whatever an older invitation of that address said; the contact e-mail's
// own row (invited_by NULL) confers nothing ("") unless its address is the
// confirmed contact e-mail.
func roleOf(m *ent.Merchant, mm *ent.MerchantMember) MemberRole {
	if isConfirmedContact(m, mm.Email) {
		return RoleOwner
	}
	if mm.InvitedBy == nil {
		return ""
	}
	return MemberRole(mm.Role)
}

// isConfirmedContact reports whether an address (normalized) is the
// merchant's contact e-mail and confirmed.
func isConfirmedContact(m *ent.Merchant, email string) bool {
	return m.EmailVerifiedAt != nil && NormalizeEmailOrSame(m.Email) == email
}

// claimMemberships applies the rule to a user: owner of every merchant
// whose confirmed contact e-mail is its verified e-mail, and member of
// every merchant that invited that e-mail. Idempotent; concurrent claims
// make one row.
func (s *Service) claimMemberships(ctx context.Context, u *ent.User) error {
	if u.EmailVerifiedAt == nil {
		return nil
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	// It runs on every dashboard read, so it reads first and writes only
	// what is missing: one query for the owned merchants without the
	// owner's row, one for the invitations not yet accepted (a write on
	// every read would serialize the readers on SQLite's one writer).
	unclaimed, err := s.cfg.DB.Ent.Merchant.Query().
		Where(merchant.EmailNormalized(merchantEmailKey(u.Email)), merchant.EmailVerifiedAtNotNil(),
			func(sel *entsql.Selector) {
				t := entsql.Table(merchantmember.Table)
				sel.Where(entsql.NotExists(entsql.Select(t.C(merchantmember.FieldID)).From(t).Where(entsql.And(
					entsql.ColumnsEQ(t.C(merchantmember.FieldMerchantID), sel.C(merchant.FieldID)),
					entsql.EQ(t.C(merchantmember.FieldEmail), u.Email)))))
			}).
		IDs(ctx)
	if err != nil {
		return fmt.Errorf("reading merchants of %s: %w", u.Email, err)
	}
	for _, id := range unclaimed {
		err = s.cfg.DB.Ent.MerchantMember.Create().
			SetMerchantID(id).
			SetEmail(u.Email).
			SetRole(merchantmember.RoleOwner).
			SetUserID(u.ID).
			SetAcceptedAt(now).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Exec(ctx)
		if err != nil && !isUniqueViolation(err, "merchantmember_merchant_id_email", "merchant_members.merchant_id, merchant_members.email") {
			return fmt.Errorf("recording owner: %w", err)
		}
	}
	// Invitations to the address are accepted by the account that proved
	// it owns it.
	pending, err := s.cfg.DB.Ent.MerchantMember.Query().
		Where(merchantmember.Email(u.Email), merchantmember.UserIDIsNil()).
		IDs(ctx)
	if err != nil {
		return fmt.Errorf("reading invitations: %w", err)
	}
	if len(pending) == 0 {
		return nil
	}
	if err := s.cfg.DB.Ent.MerchantMember.Update().
		Where(merchantmember.IDIn(pending...), merchantmember.UserIDIsNil()).
		SetUserID(u.ID).
		SetAcceptedAt(now).
		Exec(ctx); err != nil {
		return fmt.Errorf("accepting invitations: %w", err)
	}
	return nil
}

// InviteMember records an invitation of an e-mail address to manage a
// merchant in a role, and mails it in the same transaction. Only owners
// invite (ErrForbidden otherwise); an address already invited is
// ErrConflict; the merchant's contact e-mail is its owner already
// (ErrConflict); past MemberInvitationsPerDay of the merchant's a
// *RateLimitError (ErrRateLimited). An account with that address accepts
// by signing in.
func (s *Service) InviteMember(ctx context.Context, v *Viewer, merchantID uuid.UUID, rawEmail string, role MemberRole) (*ent.MerchantMember, error) {
	email, err := NormalizeEmail(rawEmail)
	if err != nil {
		return nil, err
	}
	if role != RoleOwner && role != RoleReadOnly {
		return nil, Invalid("role", "must be owner or read_only")
	}
	me, err := s.MembershipOf(ctx, v, merchantID)
	if err != nil {
		return nil, err
	}
	if !me.Role.May(ActionManageMembers) {
		return nil, ErrReadOnlyMember
	}
	if isConfirmedContact(me.Merchant, email) {
		return nil, fmt.Errorf("%w: %s is the merchant's contact e-mail, its owner already", ErrConflict, email)
	}
	// Counted before the mail is queued (the counters are not in the
	// transaction): a refused insert still counts, so a loop of duplicate
	// invitations is bounded too.
	dec, err := s.rates.invitations.Allow(ctx, ratelimit.Subject[uuid.UUID]{ID: merchantID})
	if err := rateRefusal(dec, err, "invitations", " of one merchant"); err != nil {
		return nil, err
	}
	var out *ent.MerchantMember
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		n, err := tx.MerchantMember.Query().Where(merchantmember.MerchantID(merchantID)).Count(ctx)
		if err != nil {
			return fmt.Errorf("counting members: %w", err)
		}
		if n >= MaxMerchantMembers {
			return Invalid("email", "a merchant has at most %d members; remove one first", MaxMerchantMembers)
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		out, err = tx.MerchantMember.Create().
			SetMerchantID(merchantID).
			SetEmail(email).
			SetRole(merchantmember.Role(role)).
			SetInvitedBy(v.User.ID).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Save(ctx)
		if err != nil {
			if isUniqueViolation(err, "merchantmember_merchant_id_email", "merchant_members.merchant_id, merchant_members.email") {
				return fmt.Errorf("%w: %s is already a member or invited", ErrConflict, email)
			}
			return fmt.Errorf("recording invitation: %w", err)
		}
		link := s.appURL("/dashboard")
		what := "manage"
		if role == RoleReadOnly {
			what = "see (read-only)"
		}
		_, err = s.queueMail(ctx, tx, sqlTx, Mail{
			To:      email,
			Subject: fmt.Sprintf("You are invited to %s %s on agentpay", what, me.Merchant.Name),
			Text: fmt.Sprintf("%s invited you to %s the merchant %s on agentpay.\n\nOpen the dashboard and sign in with this e-mail address: %s\n",
				v.User.Email, what, me.Merchant.Name, link),
			HTML: fmt.Sprintf(`<p>%s invited you to %s the merchant %s on agentpay.</p><p><a href="%s">Open the dashboard</a> and sign in with this e-mail address.</p>`,
				html.EscapeString(v.User.Email), what, html.EscapeString(me.Merchant.Name), html.EscapeString(link)),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MerchantMembers is a merchant's members and pending invitations, oldest
// first, as any member may see them.
func (s *Service) MerchantMembers(ctx context.Context, v *Viewer, merchantID uuid.UUID) ([]*ent.MerchantMember, error) {
	if _, err := s.MembershipOf(ctx, v, merchantID); err != nil {
		return nil, err
	}
	out, err := s.cfg.DB.Ent.MerchantMember.Query().
		Where(merchantmember.MerchantID(merchantID)).
		Order(merchantmember.ByCreatedAt(), merchantmember.ByID()).
		Limit(MaxMerchantMembers).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading members: %w", err)
	}
	return out, nil
}

// RemoveMember removes a member or a pending invitation. Only owners
// remove (ErrForbidden otherwise); the contact e-mail's membership cannot
// be removed (ErrConflict: change the merchant's e-mail instead); an
// unknown id, or another merchant's member, is ErrNotFound. Their
// dashboard sessions stop working at once (AuthenticateDashboard reads the
// membership on every request).
func (s *Service) RemoveMember(ctx context.Context, v *Viewer, merchantID, memberID uuid.UUID) error {
	me, err := s.MembershipOf(ctx, v, merchantID)
	if err != nil {
		return err
	}
	if !me.Role.May(ActionManageMembers) {
		return ErrReadOnlyMember
	}
	mm, err := s.cfg.DB.Ent.MerchantMember.Query().
		Where(merchantmember.ID(memberID), merchantmember.MerchantID(merchantID)).Only(ctx)
	if ent.IsNotFound(err) {
		return fmt.Errorf("%w: no such member", ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("reading member: %w", err)
	}
	if isConfirmedContact(me.Merchant, mm.Email) {
		return fmt.Errorf("%w: the contact e-mail's owner cannot be removed; change the merchant's e-mail instead", ErrConflict)
	}
	// The member's dashboard sessions end with it, revoked rather than
	// left to the membership check: invited again, the person opens new
	// ones, and the old tokens stay ended.
	return s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		if err := tx.MerchantMember.DeleteOneID(mm.ID).Exec(ctx); err != nil {
			return fmt.Errorf("removing member: %w", err)
		}
		if mm.UserID == nil {
			return nil // an invitation never accepted opened nothing
		}
		_, err := tx.DashboardSession.Update().
			Where(dashboardsession.MerchantID(merchantID), dashboardsession.UserID(*mm.UserID), dashboardsession.RevokedAtIsNil()).
			SetRevokedAt(s.now()).Save(ctx)
		if err != nil {
			return fmt.Errorf("revoking the member's dashboard sessions: %w", err)
		}
		return nil
	})
}

// merchantEmailKey is the form a merchant's contact e-mail is looked up by
// (merchants.email_normalized, indexed): trimmed and lower-cased, as
// NormalizeEmail stores a user's address, so the owner's sign-in finds the
// merchant whatever capitals either was written with. The migration that
// added the column computed the same with SQL's lower().
func merchantEmailKey(email string) string {
	return strings.ToLower(strings.TrimSpace(email))
}

// NormalizeEmailOrSame is NormalizeEmail's lower-cased address, or the
// address as it is when it does not parse (an old merchant's contact
// e-mail), for comparisons.
func NormalizeEmailOrSame(raw string) string {
	if e, err := NormalizeEmail(raw); err == nil {
		return e
	}
	return raw
}
