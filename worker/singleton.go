package worker

import (
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// singletonOpts keeps at most one job with the same args waiting or running
// at a time across every worker process: periodic work (scans, expiry,
// reconciliation) must not pile up behind a slow run.
func singletonOpts(queue string) river.InsertOpts {
	return river.InsertOpts{
		Queue:       queue,
		MaxAttempts: 3,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
				rivertype.JobStateRetryable, rivertype.JobStateScheduled,
			},
		},
	}
}
