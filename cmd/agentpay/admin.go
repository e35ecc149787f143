package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"agentpay/chains"
	"agentpay/internal/vault"

	"github.com/google/uuid"

	"agentpay"
)

// adminCommand is one operator command: the usage text is written from
// this table and runAdmin dispatches on it, so the two cannot disagree.
type adminCommand struct {
	name, args, help string
	run              func(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error
}

var adminCommands = []adminCommand{
	{"deactivate-merchant", "ID", "every merchant API call with the merchant's keys then answers 403", runAdminDeactivate},
	{"reactivate-merchant", "ID", "undo deactivate-merchant", runAdminReactivate},
	{"gas", "", "what the treasury paid for transactions, per chain and mode, next to the fees it collected", runAdminGas},
	{"books", "", "what the chains hold next to what the records say, per chain and mode; exits non-zero on a difference", runAdminBooks},
	{"record-funding", "CHAIN MODE ADDRESS TX_HASH", "records USDC the transaction paid the treasury or a custodial wallet from outside (amount read from the chain), for the books", runAdminRecordFunding},
}

// adminUsage is the admin command's help, written from adminCommands.
var adminUsage = func() string {
	var b strings.Builder
	b.WriteString("usage: agentpay admin <command> [arguments]\n\ncommands:\n")
	for _, c := range adminCommands {
		head := strings.TrimSpace(c.name + " " + c.args)
		if len(head) > 23 {
			fmt.Fprintf(&b, "  %s\n  %-23s  %s\n", head, "", c.help)
			continue
		}
		fmt.Fprintf(&b, "  %-23s  %s\n", head, c.help)
	}
	return b.String()
}()

var errAdminUsage = errors.New("admin: bad usage")

// runAdmin runs an operator command against the configured database.
func runAdmin(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, adminUsage)
		if len(args) == 0 {
			return errAdminUsage
		}
		return nil
	}
	for _, c := range adminCommands {
		if c.name == args[0] {
			err := c.run(ctx, cfg, logger, args[1:], stdout)
			if errors.Is(err, errAdminUsage) {
				fmt.Fprint(stdout, adminUsage)
			}
			return err
		}
	}
	fmt.Fprint(stdout, adminUsage)
	return fmt.Errorf("%w: unknown command %q", errAdminUsage, args[0])
}

func runAdminDeactivate(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	return setMerchantActive(ctx, cfg, logger, "deactivate-merchant", false, args, stdout)
}

func runAdminReactivate(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	return setMerchantActive(ctx, cfg, logger, "reactivate-merchant", true, args, stdout)
}

// setMerchantActive deactivates or reactivates a merchant. A deactivation
// returns once AUTH_CACHE_TTL has passed, when no API instance still trusts
// what it read of the merchant before: it then holds everywhere.
func setMerchantActive(ctx context.Context, cfg config, logger *slog.Logger, command string, active bool, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: %s takes one merchant id", errAdminUsage, command)
	}
	id, err := uuid.Parse(args[0])
	if err != nil {
		return fmt.Errorf("%s: %q is not a merchant id (a UUID)", command, args[0])
	}

	svc, closeDB, err := adminService(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	before, err := svc.MerchantByID(ctx, id)
	if err != nil {
		return fmt.Errorf("%s %s: %w", command, id, err)
	}
	var m = before
	if active {
		m, err = svc.ReactivateMerchant(ctx, id)
	} else {
		m, err = svc.DeactivateMerchant(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", command, id, err)
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
	logger.Info("admin", "command", command, "merchant", m.ID, "active", m.Active)
	return nil
}

// adminService builds the service the admin commands use, on the
// configured database. These commands touch no sealed data, so they do not
// need the real MASTER_KEY; without one, a throwaway key satisfies the
// service.
func adminService(ctx context.Context, cfg config, logger *slog.Logger) (*agentpay.Service, func(), error) {
	key := cfg.MasterKey
	if key == nil {
		var err error
		if key, err = vault.GenerateMasterKey(); err != nil {
			return nil, nil, err
		}
	}
	p, err := openPlatform(ctx, cfg, key)
	if err != nil {
		return nil, nil, err
	}
	svc, err := agentpay.NewService(agentpay.Config{DB: p.db, Vault: p.vault, Logger: logger, Treasury: p.treasury, Families: p.families,
		AuthCacheTTL: serviceAuthCacheTTL(cfg.AuthCacheTTL)})
	if err != nil {
		p.db.Close()
		return nil, nil, err
	}
	return svc, func() { p.db.Close() }, nil
}

// runAdminGas prints the gas ledger (agentpay's gas.go): per mode and
// chain, what the treasury paid for transactions in the chain's native
// token, split by purpose, next to the fees it collected there in USDC.
func runAdminGas(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 0 {
		return fmt.Errorf("%w: gas takes no arguments", errAdminUsage)
	}
	svc, closeDB, err := adminService(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	reports, err := svc.GasReports(ctx)
	if err != nil {
		return err
	}
	if len(reports) == 0 {
		fmt.Fprintln(stdout, "no gas recorded yet")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tCHAIN\tTXS\tGAS FEES\tRENT\tGAS TOTAL\tSEND FEES (USDC)\tSETTLEMENT FEES (USDC)")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s %s\t%s %s\t%s %s\t%s\t%s\n", r.Mode, r.Chain, r.Transactions,
			r.Fees, r.Native, r.Rent, r.Native, r.Fees.Add(r.Rent), r.Native, r.SendFees.StringFixed(6), r.SettlementFees.StringFixed(6))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reports {
		if len(r.ByPurpose) == 0 {
			continue
		}
		fmt.Fprintf(stdout, "\n%s %s by purpose:\n", r.Mode, r.Chain)
		for _, purpose := range slices.Sorted(maps.Keys(r.ByPurpose)) {
			fmt.Fprintf(stdout, "  %-13s %s %s\n", purpose, r.ByPurpose[purpose], r.Native)
		}
	}
	return nil
}

// chainService builds the service with the configured chains, on the real
// MASTER_KEY (the treasury's addresses derive from it), for the commands
// that read the chains.
func chainService(ctx context.Context, cfg config, logger *slog.Logger) (*agentpay.Service, func(), error) {
	key, err := requireMasterKey(cfg)
	if err != nil {
		return nil, nil, err
	}
	p, err := openPlatform(ctx, cfg, key)
	if err != nil {
		return nil, nil, err
	}
	svc, err := p.service(ctx, cfg, logger, nil, nil, nil)
	if err != nil {
		p.db.Close()
		return nil, nil, err
	}
	return svc, func() { p.db.Close() }, nil
}

// runAdminRecordFunding records an outside payment to the treasury or a
// custodial wallet by its transaction (agentpay's fundings.go): the amount
// is what the chain says the transaction paid the address.
func runAdminRecordFunding(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 4 {
		return fmt.Errorf("%w: record-funding takes CHAIN MODE ADDRESS TX_HASH", errAdminUsage)
	}
	chain, err := chains.ParseName(args[0])
	if err != nil {
		return fmt.Errorf("record-funding: %w", err)
	}
	mode := agentpay.Mode(args[1])
	if mode != agentpay.ModeLive && mode != agentpay.ModeTest {
		return fmt.Errorf("record-funding: mode %q: expected live or test", args[1])
	}
	svc, closeDB, err := chainService(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	amount, err := svc.RecordFundingTx(ctx, mode, chain, args[2], args[3])
	if err != nil {
		return fmt.Errorf("record-funding: %w", err)
	}
	fmt.Fprintf(stdout, "recorded %s base units paid to %s on %s (%s) by %s\n", amount, args[2], chain, mode, args[3])
	logger.Info("admin", "command", "record-funding", "chain", chain, "mode", mode, "address", args[2], "tx", args[3], "amount", amount.String())
	return nil
}

// errBooksUnbalanced is the books' exit status: a difference, named above.
var errBooksUnbalanced = errors.New("books: not balanced")

// runAdminBooks prints the books (agentpay's books.go): per mode, chain and
// holder class, what the chains hold next to what the records say, in
// USDC, then every difference with the record that explains it. It fails
// (a non-zero exit) on any difference. It reads the configured chains with
// the real MASTER_KEY, which the treasury's addresses derive from.
func runAdminBooks(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) != 0 {
		return fmt.Errorf("%w: books takes no arguments", errAdminUsage)
	}
	svc, closeDB, err := chainService(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer closeDB()
	books, err := svc.Books(ctx)
	if err != nil {
		return err
	}
	if len(books.Chains) == 0 {
		fmt.Fprintln(stdout, "no chains configured")
		return nil
	}
	if err := printBooks(stdout, books); err != nil {
		return err
	}
	if err := books.Err(); err != nil {
		fmt.Fprintf(stdout, "\nNOT BALANCED: %v\n", err)
		return fmt.Errorf("%w: %v", errBooksUnbalanced, err)
	}
	fmt.Fprintln(stdout, "\nbalanced: every holder holds exactly what its records say")
	return nil
}

// printBooks writes the books' table and their differences.
func printBooks(w io.Writer, books *agentpay.Books) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tCHAIN\tHOLDER\tADDRESSES\tCHAIN HOLDS (USDC)\tRECORDS SAY (USDC)\tDIFFERENCE (USDC)\tIN FLIGHT")
	for _, c := range books.Chains {
		for _, l := range c.Lines {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\n", c.Mode, c.Chain, l.Holder, l.Addresses,
				usdcUnits(l.OnChain, c.Decimals), usdcUnits(l.Records, c.Decimals), usdcUnits(l.Difference(), c.Decimals), len(l.InFlight))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range books.Chains {
		for _, l := range c.Lines {
			for _, d := range l.Differences {
				why := "no record explains it"
				if d.Explained != nil {
					why = d.Explained.String()
				}
				owner := ""
				if d.Owner != "" {
					owner = " (" + d.Owner + ")"
				}
				fmt.Fprintf(w, "\n%s %s %s %s%s: chain holds %s, records say %s: %s", c.Mode, c.Chain, l.Holder, d.Address, owner,
					usdcUnits(d.OnChain, c.Decimals), usdcUnits(d.Records, c.Decimals), why)
			}
			for _, r := range l.InFlight {
				fmt.Fprintf(w, "\n%s %s %s: %s", c.Mode, c.Chain, l.Holder, r)
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

// usdcUnits shows base units as USDC, exactly.
func usdcUnits(units *big.Int, decimals int32) string {
	return agentpay.FromBaseUnits(units, decimals).StringFixed(decimals)
}
