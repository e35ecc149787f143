// Package migrations holds the versioned schema migrations, one directory
// per engine (sqlite/, postgres/), generated from ent/schema by
// `go run ./ent/migrate/gen -name <change>` and never edited by hand:
// atlas.sum pins their content. It is a package of its own so the files
// stay where the generator writes them while the code that applies them
// lives elsewhere.
package migrations

import "embed"

// FS holds every migration file and each engine's atlas.sum, under
// sqlite/ and postgres/.
//
//go:embed sqlite/*.sql sqlite/atlas.sum
//go:embed postgres/*.sql postgres/atlas.sum
var FS embed.FS
