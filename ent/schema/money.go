package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema/field"
	"github.com/shopspring/decimal"
)

// Money representation, decided once for the whole schema:
//
//   - Token amounts (what moves on-chain: transfer amount/fee/net, payment
//     amount_token) are int64 base units of the token (USDC has 6 decimals, so
//     1 = 0.000001 USDC). Integers are exact on both engines, SUM()/ORDER BY work
//     in SQL on SQLite and PostgreSQL alike, and int64 holds 9.2e12 USDC.
//   - USD amounts the merchant states (session amount_usd, payment amount_usd)
//     are decimal.Decimal in Go, stored as numeric(20,6) on PostgreSQL and text
//     on SQLite. Text on SQLite because any numeric affinity there would turn the
//     value into a float. Consequence: do not compare or SUM these columns in SQL
//     on SQLite; do the arithmetic in Go with decimal.

// baseUnits marks a token amount field for GraphQL: its own 64-bit scalar,
// since Int is 32-bit and overflows above 2,147 USDC.
var baseUnits = entgql.Type("BaseUnits")

func usdField(name string) ent.Field {
	return field.Other(name, decimal.Decimal{}).
		SchemaType(map[string]string{
			dialect.Postgres: "numeric(20,6)",
			dialect.SQLite:   "text",
		}).
		Immutable().
		Annotations(entgql.Type("Decimal"))
}
