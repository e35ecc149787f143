// Temporary, never committed: re-hashes atlas.sum after a backfill was added
// to a generated migration, with atlas's own hashing.
package main

import (
	"log"

	atlasmigrate "ariga.io/atlas/sql/migrate"
)

func main() {
	for _, d := range []string{"migrations/sqlite", "migrations/postgres"} {
		dir, err := atlasmigrate.NewLocalDir(d)
		if err != nil {
			log.Fatal(err)
		}
		sum, err := dir.Checksum()
		if err != nil {
			log.Fatal(err)
		}
		if err := atlasmigrate.WriteSumFile(dir, sum); err != nil {
			log.Fatal(err)
		}
	}
}
