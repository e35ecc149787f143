package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/user"
)

// Usernames are one namespace for agents and human users (design.md
// section 6), so a name always means one party: an agent's send and a
// send-to-user can never be confused, and check-username answers for both.
// Each kind's table keeps its own names unique by index; across the two
// tables claimUsername decides.

// claimUsername checks, in the caller's transaction, that no agent and no
// user has the name, under a lock on the name (a transaction advisory lock
// on PostgreSQL; SQLite's single writer), so an agent and a user created
// at once cannot both take it. A taken name is ErrConflict.
func (s *Service) claimUsername(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, username string) error {
	if s.cfg.DB.IsPostgres() {
		if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", usernameLockKey(username)); err != nil {
			return fmt.Errorf("locking username: %w", err)
		}
	}
	taken, err := usernameTaken(ctx, tx.Client(), username)
	if err != nil {
		return err
	}
	if taken {
		return usernameTakenError(username)
	}
	return nil
}

// usernameTaken reports whether an agent or a user has the name.
func usernameTaken(ctx context.Context, db *ent.Client, username string) (bool, error) {
	taken, err := db.Agent.Query().Where(agent.Username(username)).Exist(ctx)
	if err != nil || taken {
		return taken, wrapUsernameErr(err)
	}
	taken, err = db.User.Query().Where(user.Username(username)).Exist(ctx)
	return taken, wrapUsernameErr(err)
}

func wrapUsernameErr(err error) error {
	if err != nil {
		return fmt.Errorf("checking username: %w", err)
	}
	return nil
}

func usernameTakenError(username string) error {
	return fmt.Errorf("%w: username %q is already taken", ErrConflict, username)
}

// usernameLockKey is the PostgreSQL advisory lock key of a username: a
// stable 64-bit hash, so every process agrees.
func usernameLockKey(username string) int64 {
	h := fnv.New64a()
	h.Write([]byte("agentpay username "))
	h.Write([]byte(username))
	return int64(h.Sum64())
}

// CheckUsername reports whether a username is free for an agent or a user;
// one breaking the rules is a ValidationError.
func (s *Service) CheckUsername(ctx context.Context, username string) (bool, error) {
	if err := ValidateUsername(username); err != nil {
		return false, err
	}
	taken, err := usernameTaken(ctx, s.cfg.DB.Ent, username)
	return !taken, err
}
