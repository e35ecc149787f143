package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"agentpay/internal/vault"

	"github.com/google/uuid"

	"agentpay"
)

const adminUsage = `usage: agentpay admin <command> [arguments]

commands:
  deactivate-merchant ID   every merchant API call with the merchant's keys then answers 403
  reactivate-merchant ID   undo deactivate-merchant
`

var errAdminUsage = errors.New("admin: bad usage")

// runAdmin runs an operator command against the configured database. A
// deactivation returns once AUTH_CACHE_TTL has passed, when no API instance
// still trusts what it read of the merchant before: it then holds
// everywhere.
func runAdmin(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, adminUsage)
		if len(args) == 0 {
			return errAdminUsage
		}
		return nil
	}
	var active bool
	switch args[0] {
	case "deactivate-merchant":
	case "reactivate-merchant":
		active = true
	default:
		fmt.Fprint(stdout, adminUsage)
		return fmt.Errorf("%w: unknown command %q", errAdminUsage, args[0])
	}
	if len(args) != 2 {
		fmt.Fprint(stdout, adminUsage)
		return fmt.Errorf("%w: %s takes one merchant id", errAdminUsage, args[0])
	}
	id, err := uuid.Parse(args[1])
	if err != nil {
		return fmt.Errorf("%s: %q is not a merchant id (a UUID)", args[0], args[1])
	}

	// These commands touch no sealed data, so they do not need the real
	// MASTER_KEY; without one, a throwaway key satisfies the service.
	key := cfg.MasterKey
	if key == nil {
		if key, err = vault.GenerateMasterKey(); err != nil {
			return err
		}
	}
	p, err := openPlatform(ctx, cfg, key)
	if err != nil {
		return err
	}
	defer p.db.Close()
	svc, err := agentpay.NewService(agentpay.Config{DB: p.db, Vault: p.vault, Logger: logger, Treasury: p.treasury, Families: p.families,
		AuthCacheTTL: serviceAuthCacheTTL(cfg.AuthCacheTTL)})
	if err != nil {
		return err
	}
	before, err := svc.MerchantByID(ctx, id)
	if err != nil {
		return fmt.Errorf("%s %s: %w", args[0], id, err)
	}
	var m = before
	if active {
		m, err = svc.ReactivateMerchant(ctx, id)
	} else {
		m, err = svc.DeactivateMerchant(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", args[0], id, err)
	}
	switch {
	case before.Active == m.Active && m.Active:
		fmt.Fprintf(stdout, "merchant %s (%s) was already active\n", m.ID, m.Name)
	case before.Active == m.Active:
		fmt.Fprintf(stdout, "merchant %s (%s) was already deactivated at %s\n", m.ID, m.Name, m.DeactivatedAt.UTC().Format(time.RFC3339))
	case m.Active:
		fmt.Fprintf(stdout, "merchant %s (%s) reactivated\n", m.ID, m.Name)
	default:
		fmt.Fprintf(stdout, "merchant %s (%s) deactivated at %s: its API calls now answer 403\n", m.ID, m.Name, m.DeactivatedAt.UTC().Format(time.RFC3339))
	}
	logger.Info("admin", "command", args[0], "merchant", m.ID, "active", m.Active)
	return nil
}
