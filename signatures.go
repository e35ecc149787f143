package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	entagent "agentpay/ent/agent"
	"agentpay/ent/predicate"
	"agentpay/ent/signaturechallenge"
	"agentpay/ent/wallet"
	"agentpay/internal/vault"
)

// Wallet signatures (spec section 5): advanced registration and external
// wallet verification prove control of an EVM address with an EIP-712 typed
// data signature (eth_signTypedData_v4) over a message this service issued.
//
// The message is a SignatureChallenge: random nonce, the username, the wallet
// and a validity window, stored before it is handed out. A signature is
// accepted only over a stored challenge that is unused and unexpired, and the
// challenge is marked used in the same transaction as the change it
// authorises, so a captured signature cannot be replayed.
//
// Which proof a message is for follows from the username: a username no agent
// holds yet gets an AgentRegistration message (POST /agents/register); the
// username of an existing agent gets a WalletVerification message, which only
// that agent can use (POST /agents/me/wallets/verify, authenticated). The two
// primary types hash differently, so one can never pass for the other.
//
// A signature names no message, so it is tried against the recent messages
// of its username and wallet, a bounded number (challengeCandidates) so that
// a flood of messages cannot make one submission verify thousands. Anyone
// may ask for messages for any username and wallet, so the window is per
// requester (the client's IP address): a signature is tried against its
// submitter's newest messages first, which only the submitter's own requests
// can push out, and only then against the newest of anyone's, for a client
// whose address changed between asking and submitting.

const (
	// SignatureTypeEIP712 is the only signature_type accepted.
	SignatureTypeEIP712 = "eip712"

	// SignatureChallengeTTL is how long an issued message can be signed and used.
	SignatureChallengeTTL = 10 * time.Minute

	// EIP712DomainName and EIP712DomainVersion are the typed data domain.
	EIP712DomainName    = "agentpay"
	EIP712DomainVersion = "1"

	// The domain's chainId is Base's: Base mainnet when agents live on the
	// main networks, Base Sepolia otherwise (AgentMode test, `agentpay dev`).
	// The external wallet of an advanced registration is recorded on base.
	ChainIDBase        = 8453
	ChainIDBaseSepolia = 84532

	// Primary types of the two messages.
	PrimaryTypeRegistration       = "AgentRegistration"
	PrimaryTypeWalletVerification = "WalletVerification"

	// challengeCandidates bounds how many recent challenges of one username
	// and wallet a signature is tried against, per window (the submitter's
	// own, then anyone's): a client may ask for several messages before
	// signing one.
	challengeCandidates = 20
)

// Challenge purposes.
const (
	PurposeRegister     = "register"
	PurposeVerifyWallet = "verify_wallet"
)

// SignatureMessage is what GET /agents/signature-message answers: the
// EIP-712 typed data to sign, and the same content as plain text for humans.
type SignatureMessage struct {
	// Purpose is PurposeRegister or PurposeVerifyWallet.
	Purpose   string
	Username  string
	Wallet    string // EIP-55 checksummed
	Nonce     string // 0x + 64 hex digits
	IssuedAt  time.Time
	ExpiresAt time.Time
	// TypedData is exactly what the wallet signs (eth_signTypedData_v4's
	// typed data), in JSON.
	TypedData json.RawMessage
	// ChainID is the domain's chainId.
	ChainID int64
	// Text is a plain-text rendering of the message.
	Text string
}

// RegisterRequest is an advanced registration: a username and an external
// wallet proven by an EIP-712 signature.
type RegisterRequest struct {
	Username      string
	WalletAddress string
	Signature     string
	SignatureType string
	// Requester is who submits it, as SignatureMessage's requester.
	Requester string
}

// VerifyWalletRequest adds an external wallet to an authenticated agent.
type VerifyWalletRequest struct {
	WalletAddress string
	Signature     string
	SignatureType string
	// Chain is the EVM chain the wallet is recorded on; empty means base.
	Chain        string
	SetAsPrimary bool
	// Requester is who submits it, as SignatureMessage's requester.
	Requester string
}

// eip712ChainID is the domain chainId for the agents' network.
func (s *Service) eip712ChainID() int64 {
	if s.cfg.AgentMode == ModeLive {
		return ChainIDBase
	}
	return ChainIDBaseSepolia
}

// SignatureMessage issues a message to sign for username and walletAddress:
// an AgentRegistration when no agent holds the username, a
// WalletVerification for that agent when one does. It is valid for
// SignatureChallengeTTL and once. requester is who asks (the client's IP
// address): the signed message is looked for among its requester's first.
func (s *Service) SignatureMessage(ctx context.Context, requester, username, walletAddress string) (*SignatureMessage, error) {
	if err := ValidateUsername(username); err != nil {
		return nil, err
	}
	addr, err := s.parseEVMAddress("wallet_address", walletAddress)
	if err != nil {
		return nil, err
	}
	nonce := vault.ChallengeNonce.New()
	// The message carries its times as text in whole seconds, so they
	// read back from either database exactly as they were signed
	// (challengeTyped truncates created_at). created_at itself keeps the
	// clock's precision: it orders a requester's messages, newest first.
	now := s.now().UTC()
	issued := now.Truncate(time.Second)
	var ch *ent.SignatureChallenge
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		owner, err := tx.Agent.Query().Where(entagent.Username(username)).Only(ctx)
		if err != nil && !ent.IsNotFound(err) {
			return err
		}
		create := tx.SignatureChallenge.Create().
			SetPurpose(signaturechallenge.PurposeRegister).
			SetNonce(nonce).
			SetUsername(username).
			SetWalletAddress(addr).
			SetRequester(requester).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			SetExpiresAt(issued.Add(SignatureChallengeTTL))
		if owner != nil {
			create.SetPurpose(signaturechallenge.PurposeVerifyWallet).SetAgentID(owner.ID)
		}
		ch, err = create.Save(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.challengeMessage(ch)
}

// challengeMessage rebuilds the message of a stored challenge.
func (s *Service) challengeMessage(ch *ent.SignatureChallenge) (*SignatureMessage, error) {
	m := &SignatureMessage{
		Purpose:   string(ch.Purpose),
		Username:  ch.Username,
		Wallet:    ch.WalletAddress,
		Nonce:     ch.Nonce,
		IssuedAt:  ch.CreatedAt.UTC().Truncate(time.Second),
		ExpiresAt: ch.ExpiresAt.UTC().Truncate(time.Second),
		ChainID:   s.eip712ChainID(),
	}
	var err error
	if m.TypedData, err = s.messageSigning().SigningPayload(s.challengeTyped(ch)); err != nil {
		return nil, fmt.Errorf("typed data: %w", err)
	}
	action := fmt.Sprintf("register the agent %q with this wallet", m.Username)
	if m.Purpose == PurposeVerifyWallet {
		action = fmt.Sprintf("add this wallet to the agent %q", m.Username)
	}
	m.Text = fmt.Sprintf("agentpay asks you to sign with %s to %s.\n\n"+
		"Username: %s\nWallet: %s\nNonce: %s\nIssued at: %s\nExpires at: %s\n\n"+
		"Sign the typed data (EIP-712, eth_signTypedData_v4; domain %s version %s, chainId %d). "+
		"It can be used once, before it expires.",
		m.Wallet, action, m.Username, m.Wallet, m.Nonce,
		m.IssuedAt.Format(time.RFC3339), m.ExpiresAt.Format(time.RFC3339),
		EIP712DomainName, EIP712DomainVersion, m.ChainID)
	return m, nil
}

// challengeTyped is the typed message of a stored challenge: what the
// wallet signed, rebuilt from the row alone.
func (s *Service) challengeTyped(ch *ent.SignatureChallenge) chains.TypedMessage {
	primary := PrimaryTypeRegistration
	if ch.Purpose == signaturechallenge.PurposeVerifyWallet {
		primary = PrimaryTypeWalletVerification
	}
	return chains.TypedMessage{
		Domain: chains.MessageDomain{Name: EIP712DomainName, Version: EIP712DomainVersion, ChainID: s.eip712ChainID()},
		Type:   primary,
		Fields: []chains.MessageField{
			{Name: "username", Type: "string", Value: ch.Username},
			{Name: "wallet", Type: "address", Value: ch.WalletAddress},
			{Name: "nonce", Type: "string", Value: ch.Nonce},
			{Name: "issuedAt", Type: "string", Value: ch.CreatedAt.UTC().Truncate(time.Second).Format(time.RFC3339)},
			{Name: "expiresAt", Type: "string", Value: ch.ExpiresAt.UTC().Truncate(time.Second).Format(time.RFC3339)},
		},
	}
}

// messageSigning checks wallet signatures: the EVM family's, which
// NewService checked implements it.
func (s *Service) messageSigning() chains.MessageSigning {
	return s.cfg.Families[chains.FamilyEVM].(chains.MessageSigning)
}

// Register creates an agent whose external wallet is proven by an EIP-712
// signature over a message from SignatureMessage. The wallet is recorded on
// base as a verified external wallet; the agent also gets its custodial
// wallets, as with QuickRegister.
func (s *Service) Register(ctx context.Context, req RegisterRequest) (*Registration, error) {
	if err := checkSignatureType(req.SignatureType); err != nil {
		return nil, err
	}
	if err := ValidateUsername(req.Username); err != nil {
		return nil, err
	}
	addr, err := s.parseEVMAddress("wallet_address", req.WalletAddress)
	if err != nil {
		return nil, err
	}
	sig, err := s.parseSignature(req.Signature)
	if err != nil {
		return nil, err
	}
	var reg *Registration
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		ch, findErr := s.findChallenge(ctx, tx, addr, sig, req.Requester, signaturechallenge.PurposeRegister,
			signaturechallenge.Username(req.Username))
		if ch != nil && ch.UsedAt != nil {
			// A replay says so, even though the username is now taken.
			return errChallengeUsed
		}
		if err := s.claimUsername(ctx, tx, sqlTx, req.Username); err != nil {
			return err
		}
		if findErr != nil {
			return findErr
		}
		if err := checkWalletOwner(ctx, tx, addr, uuid.Nil); err != nil {
			return err
		}
		if err := s.useChallenge(ctx, tx, ch); err != nil {
			return err
		}
		reg, err = s.createAgent(ctx, req.Username, &externalWallet{Address: addr, Chain: string(chains.Base)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return reg, nil
}

// VerifyWallet records an external EVM wallet of agent, proven by an EIP-712
// signature over a message SignatureMessage issued for the agent's username.
// Verifying a wallet the agent already holds again is allowed (it can then
// become primary); a wallet held by another agent is a conflict.
func (s *Service) VerifyWallet(ctx context.Context, agent *ent.Agent, req VerifyWalletRequest) (*ent.Wallet, error) {
	if err := checkSignatureType(req.SignatureType); err != nil {
		return nil, err
	}
	chain := chains.Base
	if req.Chain != "" {
		chain = chains.Name(req.Chain)
		if !chain.IsEVM() {
			return nil, Invalid("chain", "an eip712 signature proves an EVM wallet: base, arbitrum, ethereum or polygon")
		}
	}
	addr, err := s.parseEVMAddress("wallet_address", req.WalletAddress)
	if err != nil {
		return nil, err
	}
	sig, err := s.parseSignature(req.Signature)
	if err != nil {
		return nil, err
	}
	var w *ent.Wallet
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		if err := checkWalletOwner(ctx, tx, addr, agent.ID); err != nil {
			return err
		}
		ch, err := s.findChallenge(ctx, tx, addr, sig, req.Requester, signaturechallenge.PurposeVerifyWallet,
			signaturechallenge.AgentID(agent.ID))
		if err != nil {
			return err
		}
		if err := s.useChallenge(ctx, tx, ch); err != nil {
			return err
		}
		w, err = tx.Wallet.Query().
			Where(wallet.AgentID(agent.ID), wallet.Chain(string(chain)), wallet.Address(addr)).
			Only(ctx)
		switch {
		case ent.IsNotFound(err):
			w, err = tx.Wallet.Create().
				SetAgentID(agent.ID).
				SetChain(string(chain)).
				SetAddress(addr).
				SetKind(wallet.KindExternal).
				SetVerified(true).
				Save(ctx)
			if err != nil {
				return err
			}
		case err != nil:
			return err
		case !w.Verified:
			if w, err = w.Update().SetVerified(true).Save(ctx); err != nil {
				return err
			}
		}
		upd := tx.Agent.UpdateOneID(agent.ID).SetExternalWalletVerified(true)
		if req.SetAsPrimary {
			upd.SetPrimaryWalletID(w.ID)
		}
		if err := upd.Exec(ctx); err != nil {
			return err
		}
		// A verified external wallet is a trust input: the score commits with it.
		return s.RecomputeTrust(ctx, agent.ID)
	})
	if err != nil {
		return nil, err
	}
	agent.ExternalWalletVerified = true
	if req.SetAsPrimary {
		agent.PrimaryWalletID = &w.ID
	}
	return w, nil
}

// WalletVerifiedMessage is the message of a wallet a verified, after
// VerifyWallet.
func WalletVerifiedMessage(a *ent.Agent, w *ent.Wallet) string {
	msg := "Wallet " + w.Address + " is verified on " + w.Chain
	if IsPrimaryWallet(a, w) {
		return msg + " and is now the primary wallet."
	}
	return msg + "."
}

// checkWalletOwner refuses an address that another agent already holds, on
// any EVM chain: an EVM key is the same on all of them, so one external
// address belongs to one agent. except is the agent allowed to hold it
// (uuid.Nil for none).
func checkWalletOwner(ctx context.Context, tx *ent.Tx, addr string, except uuid.UUID) error {
	evmChains := make([]string, len(chains.EVMChains))
	for i, c := range chains.EVMChains {
		evmChains[i] = string(c)
	}
	q := tx.Wallet.Query().Where(wallet.Address(addr), wallet.ChainIn(evmChains...))
	if except != uuid.Nil {
		q.Where(wallet.AgentIDNEQ(except))
	}
	taken, err := q.Exist(ctx)
	if err != nil {
		return err
	}
	if taken {
		return fmt.Errorf("%w: wallet %s is already held by another agent", ErrConflict, addr)
	}
	return nil
}

// findChallenge returns the challenge of purpose for addr (narrowed by
// match) whose typed data sig recovers to addr, used or not, expired or not;
// or a validation error saying no issued message fits. It tries the newest
// challengeCandidates that requester asked for, then the newest of anyone
// else's, so at most twice challengeCandidates.
func (s *Service) findChallenge(ctx context.Context, tx *ent.Tx, addr string, sig []byte, requester string,
	purpose signaturechallenge.Purpose, match ...predicate.SignatureChallenge) (*ent.SignatureChallenge, error) {
	issued := false
	for _, window := range []predicate.SignatureChallenge{
		signaturechallenge.Requester(requester),
		signaturechallenge.RequesterNEQ(requester),
	} {
		candidates, err := tx.SignatureChallenge.Query().
			Where(signaturechallenge.WalletAddress(addr), signaturechallenge.PurposeEQ(purpose), window).
			Where(match...).
			Order(ent.Desc(signaturechallenge.FieldCreatedAt)).
			Limit(challengeCandidates).
			All(ctx)
		if err != nil {
			return nil, err
		}
		issued = issued || len(candidates) > 0
		for _, ch := range candidates {
			ok, err := s.messageSigning().Verify(s.challengeTyped(ch), sig, addr)
			if err != nil {
				return nil, fmt.Errorf("hashing typed data: %w", err)
			}
			if ok {
				return ch, nil
			}
		}
	}
	if !issued {
		return nil, Invalid("signature", "no message was issued for this username and wallet_address; "+
			"get one from %s and sign it", ActionGetSignatureMessage.Mark())
	}
	return nil, Invalid("signature", "does not recover to wallet_address over the message from %s "+
		"(sign its typed_data unchanged with eth_signTypedData_v4, with that wallet)", ActionGetSignatureMessage.Mark())
}

var errChallengeUsed = Invalid("signature", "this signed message was already used; get a new one from %s", ActionGetSignatureMessage.Mark())

// useChallenge marks ch used, refusing it when it already is or expired.
func (s *Service) useChallenge(ctx context.Context, tx *ent.Tx, ch *ent.SignatureChallenge) error {
	now := s.now().UTC()
	if ch.UsedAt != nil {
		return errChallengeUsed
	}
	if !now.Before(ch.ExpiresAt) {
		return Invalid("signature", "the signed message expired at %s; get a new one from %s",
			ch.ExpiresAt.UTC().Format(time.RFC3339), ActionGetSignatureMessage.Mark())
	}
	// Conditional on still being unused: of two concurrent uses, the second
	// waits for the first's row lock and then matches nothing.
	n, err := tx.SignatureChallenge.Update().
		Where(signaturechallenge.ID(ch.ID), signaturechallenge.UsedAtIsNil()).
		SetUsedAt(now).
		Save(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return errChallengeUsed
	}
	return nil
}

func checkSignatureType(t string) error {
	if t != SignatureTypeEIP712 {
		return Invalid("signature_type", "must be %s", SignatureTypeEIP712)
	}
	return nil
}

// parseEVMAddress validates an EVM address and returns its EIP-55 form.
func (s *Service) parseEVMAddress(field, address string) (string, error) {
	addr, err := s.cfg.Families[chains.FamilyEVM].ParseAddress(address)
	if err != nil {
		return "", Invalid(field, "must be an EVM address: 0x followed by 40 hex digits (mixed case only with a valid EIP-55 checksum)")
	}
	return addr, nil
}

// parseSignature decodes a signature as the client sent it: 65 bytes in
// hex, v 27/28 or 0/1, low s.
func (s *Service) parseSignature(signature string) ([]byte, error) {
	sig, err := s.messageSigning().ParseSignature(signature)
	if err != nil {
		return nil, Invalid("signature", "must be a 65-byte signature in hex: 0x followed by 130 hex digits (r, s, v with v 27/28 or 0/1)")
	}
	return sig, nil
}

// PruneSignatureChallenges deletes the signature challenges that have
// expired: every signature-message request writes one, and once expired a
// challenge can no longer be used (a replayed message is refused whether
// its challenge is expired or gone). It returns how many it deleted.
func (s *Service) PruneSignatureChallenges(ctx context.Context) (int, error) {
	n, err := s.cfg.DB.Ent.SignatureChallenge.Delete().
		Where(signaturechallenge.ExpiresAtLT(s.now().UTC())).
		Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("pruning signature challenges: %w", err)
	}
	return n, nil
}
