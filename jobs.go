package agentpay

import (
	"context"
	"database/sql"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// JobInserter enqueues background jobs in the caller's transaction (the
// outbox, see the package doc): the job exists if and only if the state
// change that caused it commits. A *river.Client[*sql.Tx] satisfies it; API processes use an
// insert-only client, the worker its working one.
type JobInserter interface {
	InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}
