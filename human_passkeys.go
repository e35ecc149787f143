package agentpay

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/passkey"
	"agentpay/ent/passkeyceremony"
	"agentpay/ent/user"
)

// Passkeys (WebAuthn, docs/humans.md): a signed-in human registers
// passkeys in settings, then signs in with one instead of an e-mailed
// link. go-webauthn/webauthn checks the browser's answers; what this file
// owns is around it:
//
//   - The relying party is the app: its id is APP_URL's host and the only
//     origin APP_URL's (Config.PasskeyRPID, PasskeyOrigins). WebAuthn
//     refuses IP addresses as relying party ids, so with an IP host
//     passkeys are off (ErrPasskeysOff) and the e-mailed link remains.
//   - A ceremony's two steps (begin: options for the browser; finish: its
//     answer) may reach different processes, so the challenge's session
//     data is a PasskeyCeremony row: bound to its purpose and, for a
//     registration, to the user; spent by a conditional update before the
//     answer is checked, so it is used once whatever the outcome; dead
//     after PasskeyCeremonyTTL. The worker prunes expired ones.
//   - Sign-in is usernameless: the passkey is discoverable (resident), and
//     the browser's answer names its credential and user handle (the
//     user's id). Beginning one needs no account, so each begin counts
//     against the client IP's sign-in limit (RatePasskeySignIn).
//   - User verification (a PIN, a fingerprint) is required at
//     registration and sign-in: the passkey is the only factor.
//   - Clones: an assertion must raise the stored signature counter unless
//     both are zero (authenticators that keep none, as synced passkeys
//     do); a counter that does not rise refuses the sign-in
//     (ErrPasskeyCounter). The counter is written back with a conditional
//     update, so two sign-ins racing on one counter value sign in once.

// PasskeyCeremonyTTL is how long a begun ceremony can be finished; the
// browser is told the same (the options' timeout).
const PasskeyCeremonyTTL = 5 * time.Minute

// MaxPasskeysPerUser bounds a user's passkeys (and the exclusion list of
// every registration's options).
const MaxPasskeysPerUser = 20

// PasskeyNameMaxLen bounds a passkey's name (characters).
const PasskeyNameMaxLen = 64

// MaxPasskeyResponseBytes bounds the browser's answer (the credential's
// JSON). Real answers are a few kilobytes; attestation certificates add a
// few more.
const MaxPasskeyResponseBytes = 64 << 10

// DefaultPasskeyRPName is the relying party's name authenticators show
// when Config.PasskeyRPName is empty.
const DefaultPasskeyRPName = "agentpay"

var (
	// ErrPasskeysOff is a passkey request to a server configured without
	// a relying party id.
	ErrPasskeysOff = fmt.Errorf("%w: passkeys are off on this server (APP_URL's host must be a domain name, such as localhost)", ErrUnavailable)
	// ErrPasskeyCeremonyInvalid is a ceremony that is unknown, used,
	// expired, of another purpose or another user: one answer for all.
	ErrPasskeyCeremonyInvalid = fmt.Errorf("%w: this passkey request is unknown, used or expired; start again", ErrNotFound)
	// ErrPasskeyNotRecognized is a sign-in with a passkey registered
	// nowhere here (or since deleted).
	ErrPasskeyNotRecognized = fmt.Errorf("%w: this passkey is not registered here; sign in by e-mail", ErrUnauthorized)
	// ErrPasskeyRefused is an answer that fails WebAuthn's checks (a
	// wrong challenge, origin or signature, no user verification).
	ErrPasskeyRefused = fmt.Errorf("%w: the passkey's answer did not check out; try again", ErrUnauthorized)
	// ErrPasskeyCounter is an assertion whose signature counter did not
	// rise: the passkey may have been copied.
	ErrPasskeyCounter = fmt.Errorf("%w: this passkey's signature counter went backwards, a sign it may have been copied; "+
		"sign in by e-mail and remove it in settings", ErrUnauthorized)
)

// newRelyingParty is go-webauthn's relying party of cfg; nil when
// passkeys are off (no PasskeyRPID).
func newRelyingParty(cfg Config) (*webauthn.WebAuthn, error) {
	if cfg.PasskeyRPID == "" {
		return nil, nil
	}
	if err := protocol.ValidateRPID(cfg.PasskeyRPID); err != nil {
		return nil, fmt.Errorf("agentpay: Config.PasskeyRPID %q: %w (WebAuthn needs a domain name, such as localhost)", cfg.PasskeyRPID, err)
	}
	if len(cfg.PasskeyOrigins) == 0 {
		return nil, errors.New("agentpay: Config.PasskeyOrigins is required with PasskeyRPID")
	}
	name := cfg.PasskeyRPName
	if name == "" {
		name = DefaultPasskeyRPName
	}
	timeout := webauthn.TimeoutConfig{Timeout: PasskeyCeremonyTTL, TimeoutUVD: PasskeyCeremonyTTL}
	wa, err := webauthn.New(&webauthn.Config{
		RPID: cfg.PasskeyRPID, RPDisplayName: name, RPOrigins: cfg.PasskeyOrigins,
		AttestationPreference: protocol.PreferNoAttestation,
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:        protocol.ResidentKeyRequirementRequired,
			RequireResidentKey: protocol.ResidentKeyRequired(),
			UserVerification:   protocol.VerificationRequired,
		},
		// The expiry is the ceremony row's, by the service's clock.
		Timeouts: webauthn.TimeoutsConfig{Login: timeout, Registration: timeout},
	})
	if err != nil {
		return nil, fmt.Errorf("agentpay: passkeys: %w", err)
	}
	return wa, nil
}

// PasskeysOn reports whether this server takes passkeys (a relying party
// id is configured), so pages offer them only then.
func (s *Service) PasskeysOn() bool { return s.passkeys != nil }

func (s *Service) relyingParty() (*webauthn.WebAuthn, error) {
	if s.passkeys == nil {
		return nil, ErrPasskeysOff
	}
	return s.passkeys, nil
}

// PasskeyCeremony is a begun ceremony: its id, which the finish names,
// and the options for the browser's navigator.credentials.create (a
// registration) or .get (a sign-in), as JSON ({"publicKey": {...}}, binary
// members base64url).
type PasskeyCeremony struct {
	ID        uuid.UUID
	Options   json.RawMessage
	ExpiresAt time.Time
}

// passkeyUser is a user as go-webauthn sees them: the user handle is the
// user's id (random, and no personal data), the name the username.
type passkeyUser struct {
	u     *ent.User
	creds []webauthn.Credential
}

func (p *passkeyUser) WebAuthnID() []byte { return p.u.ID[:] }
func (p *passkeyUser) WebAuthnName() string {
	return p.u.Username
}

func (p *passkeyUser) WebAuthnDisplayName() string {
	if p.u.DisplayName != "" {
		return p.u.DisplayName
	}
	return p.u.Username
}
func (p *passkeyUser) WebAuthnCredentials() []webauthn.Credential { return p.creds }

// credentialOf is a stored passkey as go-webauthn checks assertions with.
func credentialOf(pk *ent.Passkey) webauthn.Credential {
	transports := make([]protocol.AuthenticatorTransport, len(pk.Transports))
	for i, t := range pk.Transports {
		transports[i] = protocol.AuthenticatorTransport(t)
	}
	return webauthn.Credential{
		ID: pk.CredentialID, PublicKey: pk.PublicKey, AttestationFormat: pk.AttestationFormat,
		Transport: transports, Flags: webauthn.CredentialFlagsFromMsgpByte(pk.Flags),
		Authenticator: webauthn.Authenticator{AAGUID: pk.Aaguid, SignCount: uint32(pk.SignCount)},
	}
}

// UserPasskeys are a user's passkeys, newest first.
func (s *Service) UserPasskeys(ctx context.Context, u *ent.User) ([]*ent.Passkey, error) {
	pks, err := s.cfg.DB.Ent.Passkey.Query().Where(passkey.UserID(u.ID)).
		Order(ent.Desc(passkey.FieldCreatedAt), ent.Desc(passkey.FieldID)).
		Limit(MaxPasskeysPerUser).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading passkeys: %w", err)
	}
	return pks, nil
}

// BeginPasskeyRegistration starts registering a passkey for a signed-in
// user: the options exclude the user's passkeys (an authenticator holding
// one says so rather than making a second). A user who has a passkey
// needs a step-up first (proof: of StepUpAddPasskey, human_stepups.go), so a
// stolen session cannot add its own passkey to the account. A user with
// MaxPasskeysPerUser passkeys is ErrConflict.
func (s *Service) BeginPasskeyRegistration(ctx context.Context, u *ent.User, proof StepUpProof) (*PasskeyCeremony, error) {
	wa, err := s.relyingParty()
	if err != nil {
		return nil, err
	}
	pks, err := s.UserPasskeys(ctx, u)
	if err != nil {
		return nil, err
	}
	if len(pks) >= MaxPasskeysPerUser {
		return nil, errTooManyPasskeys
	}
	if err := s.spendStepUp(ctx, u, stepUpTarget{action: StepUpAddPasskey}, proof); err != nil {
		return nil, err
	}
	exclude := make([]protocol.CredentialDescriptor, len(pks))
	for i, pk := range pks {
		c := credentialOf(pk)
		exclude[i] = c.Descriptor()
	}
	creation, sd, err := wa.BeginRegistration(&passkeyUser{u: u}, webauthn.WithExclusions(exclude))
	if err != nil {
		return nil, fmt.Errorf("beginning passkey registration: %w", err)
	}
	return s.saveCeremony(ctx, passkeyceremony.PurposeRegister, &u.ID, sd, creation)
}

var errTooManyPasskeys = fmt.Errorf("%w: an account holds at most %d passkeys; delete one first", ErrConflict, MaxPasskeysPerUser)

// saveCeremony records a begun ceremony and answers its options.
func (s *Service) saveCeremony(ctx context.Context, purpose passkeyceremony.Purpose, userID *uuid.UUID, sd *webauthn.SessionData, options any) (*PasskeyCeremony, error) {
	data, err := json.Marshal(sd)
	if err != nil {
		return nil, fmt.Errorf("encoding passkey ceremony: %w", err)
	}
	opts, err := json.Marshal(options)
	if err != nil {
		return nil, fmt.Errorf("encoding passkey options: %w", err)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	c, err := s.cfg.DB.Ent.PasskeyCeremony.Create().
		SetPurpose(purpose).
		SetNillableUserID(userID).
		SetSessionData(data).
		SetExpiresAt(now.Add(PasskeyCeremonyTTL)).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("recording passkey ceremony: %w", err)
	}
	return &PasskeyCeremony{ID: c.ID, Options: opts, ExpiresAt: c.ExpiresAt}, nil
}

// spendCeremony takes a live ceremony of purpose (and of the user, for a
// registration) once, and answers its session data. Unknown, used,
// expired or another's: ErrPasskeyCeremonyInvalid.
func (s *Service) spendCeremony(ctx context.Context, id string, purpose passkeyceremony.Purpose, userID *uuid.UUID) (webauthn.SessionData, error) {
	var sd webauthn.SessionData
	cid, err := uuid.Parse(id)
	if err != nil {
		return sd, ErrPasskeyCeremonyInvalid
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	q := s.cfg.DB.Ent.PasskeyCeremony.Update().Where(
		passkeyceremony.ID(cid), passkeyceremony.PurposeEQ(purpose),
		passkeyceremony.UsedAtIsNil(), passkeyceremony.ExpiresAtGT(now))
	if userID != nil {
		q = q.Where(passkeyceremony.UserID(*userID))
	} else {
		q = q.Where(passkeyceremony.UserIDIsNil())
	}
	n, err := q.SetUsedAt(now).Save(ctx)
	if err != nil {
		return sd, fmt.Errorf("spending passkey ceremony: %w", err)
	}
	if n == 0 {
		return sd, ErrPasskeyCeremonyInvalid
	}
	c, err := s.cfg.DB.Ent.PasskeyCeremony.Get(ctx, cid)
	if err != nil {
		return sd, fmt.Errorf("reading passkey ceremony: %w", err)
	}
	if err := json.Unmarshal(c.SessionData, &sd); err != nil {
		return sd, fmt.Errorf("decoding passkey ceremony: %w", err)
	}
	return sd, nil
}

// ValidatePasskeyName trims a passkey's name and checks it: 1 to
// PasskeyNameMaxLen characters of valid UTF-8, no control characters.
func ValidatePasskeyName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > PasskeyNameMaxLen ||
		strings.ContainsFunc(name, unicode.IsControl) {
		return "", Invalid("name", "must be 1 to %d characters, without control characters", PasskeyNameMaxLen)
	}
	return name, nil
}

func checkPasskeyResponse(response []byte) error {
	if len(response) == 0 || len(response) > MaxPasskeyResponseBytes {
		return Invalid("credential", "must be the browser's credential as JSON, at most %d bytes", MaxPasskeyResponseBytes)
	}
	return nil
}

// FinishPasskeyRegistration checks the browser's answer to a registration
// the user began (credential: the PublicKeyCredential as JSON) and stores
// the passkey under name. A bad name or an unreadable answer is a
// ValidationError and spends nothing; the ceremony is then spent, so an
// answer that fails the checks needs a new one. A passkey registered
// already (here, by anyone) is ErrConflict.
func (s *Service) FinishPasskeyRegistration(ctx context.Context, u *ent.User, ceremonyID, name string, response []byte) (*ent.Passkey, error) {
	wa, err := s.relyingParty()
	if err != nil {
		return nil, err
	}
	if name, err = ValidatePasskeyName(name); err != nil {
		return nil, err
	}
	if err := checkPasskeyResponse(response); err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return nil, Invalid("credential", "is not a WebAuthn registration answer: %s", protocolDetail(err))
	}
	sd, err := s.spendCeremony(ctx, ceremonyID, passkeyceremony.PurposeRegister, &u.ID)
	if err != nil {
		return nil, err
	}
	cred, err := wa.CreateCredential(&passkeyUser{u: u}, sd, parsed)
	if err != nil {
		return nil, Invalid("credential", "was refused: %s", protocolDetail(err))
	}
	transports := make([]string, len(cred.Transport))
	for i, t := range cred.Transport {
		transports[i] = string(t)
	}
	var pk *ent.Passkey
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		n, err := tx.Passkey.Query().Where(passkey.UserID(u.ID)).Count(ctx)
		if err != nil {
			return fmt.Errorf("counting passkeys: %w", err)
		}
		if n >= MaxPasskeysPerUser {
			return errTooManyPasskeys
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		pk, err = tx.Passkey.Create().
			SetUserID(u.ID).
			SetCredentialID(cred.ID).
			SetPublicKey(cred.PublicKey).
			SetAttestationFormat(cred.AttestationFormat).
			SetAaguid(cred.Authenticator.AAGUID).
			SetTransports(transports).
			SetFlags(cred.Flags.MsgpByte()).
			SetSignCount(int64(cred.Authenticator.SignCount)).
			SetName(name).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Save(ctx)
		return err
	})
	if isUniqueViolation(err, "passkeys_credential_id_key", "passkeys.credential_id") {
		return nil, fmt.Errorf("%w: this passkey is registered already", ErrConflict)
	}
	if err != nil {
		return nil, err
	}
	return pk, nil
}

// protocolDetail is what a go-webauthn error says that is safe to show:
// its short description, never its debug information.
func protocolDetail(err error) string {
	var perr *protocol.Error
	if errors.As(err, &perr) && perr.Details != "" {
		return perr.Details
	}
	return "it could not be read"
}

// removePasskeyTarget is the step-up target of removing one of the user's
// passkeys; another user's, or an unknown id, is ErrNotFound.
func (s *Service) removePasskeyTarget(ctx context.Context, u *ent.User, id string) (stepUpTarget, error) {
	pid, err := uuid.Parse(id)
	if err != nil {
		return stepUpTarget{}, fmt.Errorf("%w: no passkey with id %q", ErrNotFound, id)
	}
	pk, err := s.cfg.DB.Ent.Passkey.Query().Where(passkey.ID(pid), passkey.UserID(u.ID)).Only(ctx)
	if ent.IsNotFound(err) {
		return stepUpTarget{}, fmt.Errorf("%w: no passkey with id %q", ErrNotFound, id)
	}
	if err != nil {
		return stepUpTarget{}, fmt.Errorf("reading passkey: %w", err)
	}
	return stepUpTarget{action: StepUpRemovePasskey, subject: pk.ID.String(),
		summary: fmt.Sprintf("remove the passkey %q from your agentpay account %s", pk.Name, u.Username)}, nil
}

// DeletePasskey deletes one of the user's passkeys, with a step-up
// (proof: of StepUpRemovePasskey for this passkey, human_stepups.go): a stolen
// session cannot strip the account of the passkey that guards its money.
// Another user's, or an unknown id, is ErrNotFound.
func (s *Service) DeletePasskey(ctx context.Context, u *ent.User, id string, proof StepUpProof) error {
	t, err := s.removePasskeyTarget(ctx, u, id)
	if err != nil {
		return err
	}
	if err := s.spendStepUp(ctx, u, t, proof); err != nil {
		return err
	}
	pid := uuid.MustParse(t.subject)
	n, err := s.cfg.DB.Ent.Passkey.Delete().Where(passkey.ID(pid), passkey.UserID(u.ID)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("deleting passkey: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no passkey with id %q", ErrNotFound, id)
	}
	return nil
}

// BeginPasskeySignIn starts a usernameless sign-in: the options name no
// credential, and the browser offers the person the passkeys it holds for
// the app. Nobody is signed in yet, so each begin counts against the
// client IP's limit (RatePasskeySignIn).
func (s *Service) BeginPasskeySignIn(ctx context.Context, ip string) (*PasskeyCeremony, error) {
	wa, err := s.relyingParty()
	if err != nil {
		return nil, err
	}
	if _, err := s.AllowIP(ctx, ip, RatePasskeySignIn); err != nil {
		return nil, err
	}
	assertion, sd, err := wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, fmt.Errorf("beginning passkey sign-in: %w", err)
	}
	return s.saveCeremony(ctx, passkeyceremony.PurposeSignin, nil, sd, assertion)
}

// FinishPasskeySignIn checks the browser's answer to a sign-in (the
// PublicKeyCredential as JSON) and opens a browser session as
// CompleteSignIn does. The ceremony is spent whatever the outcome.
func (s *Service) FinishPasskeySignIn(ctx context.Context, ceremonyID string, response []byte, userAgent string) (*SignIn, error) {
	wa, err := s.relyingParty()
	if err != nil {
		return nil, err
	}
	if err := checkPasskeyResponse(response); err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return nil, Invalid("credential", "is not a WebAuthn sign-in answer: %s", protocolDetail(err))
	}
	sd, err := s.spendCeremony(ctx, ceremonyID, passkeyceremony.PurposeSignin, nil)
	if err != nil {
		return nil, err
	}
	// The passkey the answer names, and its user: the user handle must be
	// the passkey's user (go-webauthn compares it with WebAuthnID).
	var (
		stored    *ent.Passkey
		owner     *ent.User
		lookupErr error
	)
	lookup := func(rawID, userHandle []byte) (webauthn.User, error) {
		pk, err := s.cfg.DB.Ent.Passkey.Query().Where(passkey.CredentialID(rawID)).Only(ctx)
		if ent.IsNotFound(err) || err == nil && !bytes.Equal(userHandle, pk.UserID[:]) {
			return nil, ErrPasskeyNotRecognized
		}
		if err != nil {
			lookupErr = fmt.Errorf("reading passkey: %w", err)
			return nil, lookupErr
		}
		u, err := s.cfg.DB.Ent.User.Query().Where(user.ID(pk.UserID)).Only(ctx)
		if err != nil {
			lookupErr = fmt.Errorf("reading passkey's user: %w", err)
			return nil, lookupErr
		}
		stored, owner = pk, u
		return &passkeyUser{u: u, creds: []webauthn.Credential{credentialOf(pk)}}, nil
	}
	_, cred, err := wa.ValidatePasskeyLogin(lookup, sd, parsed)
	switch {
	case lookupErr != nil:
		return nil, lookupErr
	case errors.Is(err, ErrPasskeyNotRecognized):
		return nil, ErrPasskeyNotRecognized
	case err != nil:
		return nil, ErrPasskeyRefused
	case cred.Authenticator.CloneWarning:
		return nil, ErrPasskeyCounter
	}
	var out SignIn
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		// Conditional on the counter read: an answer racing another with
		// the same counter finds it moved, as a clone would.
		n, err := tx.Passkey.Update().
			Where(passkey.ID(stored.ID), passkey.SignCount(stored.SignCount)).
			SetSignCount(int64(cred.Authenticator.SignCount)).
			SetFlags(cred.Flags.MsgpByte()).
			SetLastUsedAt(now).
			SetUpdatedAt(now).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("recording passkey use: %w", err)
		}
		if n == 0 {
			// Deleted meanwhile, or another sign-in moved the counter.
			exists, err := tx.Passkey.Query().Where(passkey.ID(stored.ID)).Exist(ctx)
			if err != nil {
				return fmt.Errorf("reading passkey: %w", err)
			}
			if !exists {
				return ErrPasskeyNotRecognized
			}
			return ErrPasskeyCounter
		}
		out.User = owner
		out.Session, out.SessionToken, err = s.openBrowserSession(ctx, tx, owner, userAgent, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// PrunePasskeyCeremonies deletes the ceremonies that have expired (each
// begin writes one, and anyone may begin a sign-in), and the step-ups
// (human_stepups.go) an hour after theirs; it returns how many.
func (s *Service) PrunePasskeyCeremonies(ctx context.Context) (int, error) {
	n, err := s.cfg.DB.Ent.PasskeyCeremony.Delete().
		Where(passkeyceremony.ExpiresAtLT(s.now().UTC())).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("pruning passkey ceremonies: %w", err)
	}
	m, err := s.pruneStepUps(ctx)
	return n + m, err
}

// checkUserAssertion checks a passkey assertion of one of the user's
// passkeys (pks) against a begun assertion's session data, and records the
// passkey's use: its counter must rise (unless both are zero), written back
// conditionally so two assertions racing on one counter value pass once.
func (s *Service) checkUserAssertion(ctx context.Context, u *ent.User, pks []*ent.Passkey, sd webauthn.SessionData,
	parsed *protocol.ParsedCredentialAssertionData) error {
	wa, err := s.relyingParty()
	if err != nil {
		return err
	}
	pu := &passkeyUser{u: u}
	for _, pk := range pks {
		pu.creds = append(pu.creds, credentialOf(pk))
	}
	cred, err := wa.ValidateLogin(pu, sd, parsed)
	if err != nil {
		return ErrPasskeyRefused
	}
	if cred.Authenticator.CloneWarning {
		return ErrPasskeyCounter
	}
	var stored *ent.Passkey
	for _, pk := range pks {
		if bytes.Equal(pk.CredentialID, cred.ID) {
			stored = pk
		}
	}
	if stored == nil {
		return ErrPasskeyNotRecognized
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	n, err := s.cfg.DB.Ent.Passkey.Update().
		Where(passkey.ID(stored.ID), passkey.SignCount(stored.SignCount)).
		SetSignCount(int64(cred.Authenticator.SignCount)).
		SetFlags(cred.Flags.MsgpByte()).
		SetLastUsedAt(now).
		SetUpdatedAt(now).
		Save(ctx)
	if err != nil {
		return fmt.Errorf("recording passkey use: %w", err)
	}
	if n == 0 {
		return ErrPasskeyCounter
	}
	return nil
}
