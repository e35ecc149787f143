package agentpay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/merchantmember"
	"agentpay/ent/pairing"
)

// Signing a merchant up from the app (docs/dashboard.md#signing-up-a-merchant):
// a signed-in person gives a name, a contact e-mail and, optionally, where
// settlements are paid, and gets what POST /checkout/merchants/register
// gives (RegisterMerchant: the merchant, both key pairs and webhook
// secrets shown once, the contact e-mail's confirmation link mailed in the
// same transaction), plus one thing: the person is the merchant's owner at
// once, by a membership recorded in that transaction (invited_by is the
// person, so it is an owner "by name", which a later change of the
// contact e-mail does not end).
//
// Why that is safe where the contact e-mail needs a link: the person holds
// the live secret key the moment the merchant exists, which does all an
// owner does; the membership gives the dashboard nothing the keys do not.
// What the contact e-mail's confirmation guards (an address owning a
// merchant someone else registered) is unchanged: the contact address owns
// it only once it follows the link, as with any registration. The person's
// own address must be verified (an e-mailed link proved it), since the
// membership names it.

// MerchantSignup is what the app's sign-up form gives.
type MerchantSignup struct {
	Name, Email string
	// SettlementAddress and SettlementChain are optional (spec 2.5): an
	// address without a chain settles on the chain each payment was made
	// on.
	SettlementAddress, SettlementChain string
}

// ErrSignUpUnverified is a person whose own e-mail address is not verified
// signing a merchant up.
var ErrSignUpUnverified = fmt.Errorf("%w: confirm your own e-mail address first: sign in with a link e-mailed to it", ErrForbidden)

// SignUpMerchant registers a merchant for a signed-in person, who owns it
// from now on (see above). Registration's rules and answers hold: a
// refused field is ErrInvalid and writes nothing.
func (s *Service) SignUpMerchant(ctx context.Context, v *Viewer, in MerchantSignup) (*MerchantRegistration, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	if v.User.EmailVerifiedAt == nil {
		return nil, ErrSignUpUnverified
	}
	input := MerchantInput{Name: &in.Name, Email: &in.Email}
	if addr := strings.TrimSpace(in.SettlementAddress); addr != "" {
		input.SettlementAddress = &addr
	}
	if chain := strings.TrimSpace(in.SettlementChain); chain != "" {
		input.SettlementChain = &chain
	}
	return s.registerMerchant(ctx, input, v.User)
}

// recordCreatorOwner makes the person who signed a merchant up its owner,
// accepted, in the registration's transaction.
func (s *Service) recordCreatorOwner(ctx context.Context, tx *ent.Tx, merchantID uuid.UUID, u *ent.User) error {
	email, err := NormalizeEmail(u.Email)
	if err != nil {
		return err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if err := tx.MerchantMember.Create().
		SetMerchantID(merchantID).
		SetEmail(email).
		SetRole(merchantmember.RoleOwner).
		SetUserID(u.ID).
		SetInvitedBy(u.ID).
		SetAcceptedAt(now).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		Exec(ctx); err != nil {
		return fmt.Errorf("recording the merchant's owner: %w", err)
	}
	return nil
}

// Landing is the page a person goes to after signing in when no page
// asked for it.
type Landing string

// The landings.
const (
	// LandingHome: the app's home (wallets, pairings, approvals).
	LandingHome Landing = "home"
	// LandingDashboard: the merchant dashboard.
	LandingDashboard Landing = "dashboard"
)

// LandingOf is where a signed-in person lands: a person who manages a
// merchant and has nothing of a consumer (no pairing with an agent, asked
// or made: every consumer page, approvals, cards, policies, money received
// from agents, follows from one) goes to the dashboard rather than through
// wallets and agents they do not have; anyone else to the home page.
// (Every account has its custodial wallets from the start, so they say
// nothing.)
func (s *Service) LandingOf(ctx context.Context, v *Viewer) (Landing, error) {
	merchants, err := s.MerchantsOf(ctx, v)
	if err != nil || len(merchants) == 0 {
		return LandingHome, err
	}
	paired, err := s.cfg.DB.Ent.Pairing.Query().Where(pairing.UserID(v.User.ID)).Exist(ctx)
	if err != nil {
		return LandingHome, fmt.Errorf("reading pairings: %w", err)
	}
	if paired {
		return LandingHome, nil
	}
	return LandingDashboard, nil
}
