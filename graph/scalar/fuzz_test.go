package scalar

// Fuzz targets of the GraphQL scalars that read client input. Seeds are in
// testdata/fuzz/<target>; `make fuzz` runs each target (docs/testing.md).

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/shopspring/decimal"
)

// FuzzDecimal: a Decimal argument, as a variable (json.Number), a string
// or a literal (int64, float64), reads as the exact number it spells, and
// what it reads is written back as a JSON number that reads the same.
func FuzzDecimal(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, i int64, fl float64) {
		for _, v := range []any{json.Number(s), s, i, int(i), fl} {
			d, err := UnmarshalDecimal(v)
			if err != nil {
				continue
			}
			var b bytes.Buffer
			MarshalDecimal(d).MarshalGQL(&b)
			var n json.Number
			if err := json.Unmarshal(b.Bytes(), &n); err != nil {
				t.Fatalf("%#v read as %s, written as %q, which is not a JSON number", v, d, b.String())
			}
			back, err := UnmarshalDecimal(n)
			if err != nil || !back.Equal(d) {
				t.Fatalf("%#v read as %s, written as %s, read back as %s (%v)", v, d, b.String(), back, err)
			}
			if str, ok := v.(string); ok {
				want, err := decimal.NewFromString(str)
				if err != nil || !want.Equal(d) {
					t.Fatalf("%q read as %s", str, d)
				}
			}
		}
	})
}

// FuzzBaseUnits: BaseUnits is gqlgen's Int64 (gqlgen.yml): an argument
// reads as a 64-bit integer exactly or is refused, never wrapped or
// rounded, and is written back as the same integer.
func FuzzBaseUnits(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, i int64) {
		for _, v := range []any{json.Number(s), s, i} {
			n, err := graphql.UnmarshalInt64(v)
			if err != nil {
				continue
			}
			if str, ok := v.(string); ok {
				want, perr := strconv.ParseInt(str, 10, 64)
				if perr != nil || want != n {
					t.Fatalf("%q read as %d", str, n)
				}
			}
			var b bytes.Buffer
			graphql.MarshalInt64(n).MarshalGQL(&b)
			back, err := strconv.ParseInt(b.String(), 10, 64)
			if err != nil || back != n {
				t.Fatalf("%#v read as %d, written as %q", v, n, b.String())
			}
		}
	})
}
