package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/user"
	"agentpay/ent/wallet"
)

// Human users (the app at APP_URL): an account has a username in the
// namespace agents share (human_usernames.go), a display name, an e-mail address
// (the only way to sign in besides passkeys) and two custodial USDC wallets
// made as agents' are.
//
// The address is verified (email_verified_at) only by a link e-mailed to
// it: the account is made from one (an e-mailed sign-in or invitation
// link: NewUser.EmailVerified), or the address later signs in by an
// e-mailed link (CompleteSignIn, proveAddress). A verified address is what
// makes an account a merchant's owner or member (merchant_members.go), so
// nothing else sets it.

// DisplayNameMaxLen bounds a user's display name (characters).
const DisplayNameMaxLen = 100

// NormalizeEmail is the form addresses are stored and compared in:
// trimmed and lower-cased, so one person has one account and one daily
// invitation whatever the capitals. An invalid address is a
// ValidationError.
func NormalizeEmail(raw string) (string, error) {
	email := strings.ToLower(strings.TrimSpace(raw))
	if err := validateEmail(email); err != nil {
		return "", err
	}
	return email, nil
}

// NewUser is what a user account is created with.
type NewUser struct {
	Email       string
	Username    string
	DisplayName string
	// EmailVerified: the person has just opened a link e-mailed to Email
	// (a sign-in link, or an invitation's e-mailed token), so the address
	// is recorded as verified. Set only there; otherwise it stays
	// unverified until the address signs in by an e-mailed link.
	EmailVerified bool
}

func (in *NewUser) validate() error {
	email, err := NormalizeEmail(in.Email)
	if err != nil {
		return err
	}
	in.Email = email
	if err := ValidateUsername(in.Username); err != nil {
		return err
	}
	in.DisplayName, err = ValidateDisplayName(in.DisplayName)
	return err
}

// ValidateDisplayName trims a display name and checks it: at most
// DisplayNameMaxLen characters of valid UTF-8 without control characters
// (it is shown to agents and in e-mails, where a line break or an escape
// could pass for something else). Empty is allowed: the username stands
// in.
func ValidateDisplayName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > DisplayNameMaxLen ||
		strings.ContainsFunc(name, unicode.IsControl) {
		return "", Invalid("display_name", "must be at most %d characters of valid UTF-8, without control characters", DisplayNameMaxLen)
	}
	return name, nil
}

// UpdateDisplayName changes a user's display name (ValidateDisplayName's
// rule) and answers the user as changed.
func (s *Service) UpdateDisplayName(ctx context.Context, u *ent.User, name string) (*ent.User, error) {
	name, err := ValidateDisplayName(name)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	out, err := s.cfg.DB.Ent.User.UpdateOneID(u.ID).SetDisplayName(name).SetUpdatedAt(now).Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("changing display name: %w", err)
	}
	return out, nil
}

// CreateUser creates a human user with its solana and base custodial
// wallets, in one transaction (joining the caller's, if any). A username
// taken by an agent or a user, or an address that already has an account,
// is ErrConflict.
func (s *Service) CreateUser(ctx context.Context, in NewUser) (*ent.User, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	custodials, err := s.newCustodialWallets()
	if err != nil {
		return nil, err
	}
	var u *ent.User
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if err := s.claimUsername(ctx, tx, sqlTx, in.Username); err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		var err error
		c := tx.User.Create().
			SetUsername(in.Username).
			SetDisplayName(in.DisplayName).
			SetEmail(in.Email).
			SetCreatedAt(now).
			SetUpdatedAt(now)
		if in.EmailVerified {
			c.SetEmailVerifiedAt(now)
		}
		u, err = c.Save(ctx)
		if err != nil {
			return err
		}
		builders := make([]*ent.WalletCreate, len(custodials))
		for i, c := range custodials {
			builders[i] = c.create(tx, now).SetUserID(u.ID)
		}
		return tx.Wallet.CreateBulk(builders...).Exec(ctx)
	})
	switch {
	case err == nil:
		return u, nil
	case isUniqueViolation(err, "users_username_key", "users.username"):
		return nil, usernameTakenError(in.Username)
	case isUniqueViolation(err, "users_email_key", "users.email"):
		return nil, fmt.Errorf("%w: %s already has an account", ErrConflict, in.Email)
	}
	return nil, err
}

// UserByID reads a user; an unknown or malformed id is ErrNotFound.
func (s *Service) UserByID(ctx context.Context, id string) (*ent.User, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("%w: no user with id %q", ErrNotFound, id)
	}
	u, err := s.cfg.DB.Ent.User.Get(ctx, uid)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no user with id %q", ErrNotFound, id)
	}
	return u, err
}

// UserByEmail reads the account of an address (normalized); none is
// ErrNotFound.
func (s *Service) UserByEmail(ctx context.Context, email string) (*ent.User, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	u, err := s.cfg.DB.Ent.User.Query().Where(user.Email(email)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no account for this address", ErrNotFound)
	}
	return u, err
}

// UserWallets are a user's custodial wallets, solana then base.
func (s *Service) UserWallets(ctx context.Context, u *ent.User) ([]*ent.Wallet, error) {
	ws, err := s.cfg.DB.Ent.Wallet.Query().Where(wallet.UserID(u.ID)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading user wallets: %w", err)
	}
	sortWallets(ws)
	return ws, nil
}
