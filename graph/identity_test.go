package graph

import (
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/identity/sandbox"
)

// TestStartIdentityVerification: the signed-in human starts a verification
// and is given the provider's page; without the CSRF token nothing starts.
func TestStartIdentityVerification(t *testing.T) {
	sb, err := sandbox.New(sandbox.Config{Secret: []byte("sandbox-callback-secret-of-32-bytes!")})
	require.NoError(t, err)
	a := newViewerAPIWith(t, agentpay.Config{IdentityProvider: sb})
	_, session, csrf := a.signIn(t, "ann_kyc")

	const start = `mutation { startIdentityVerification { verificationId url } }`
	res := a.asViewer(t, session, "", start, nil)
	require.Equal(t, "FORBIDDEN", res.code(t))
	var status struct {
		Viewer struct{ IdentityStatus string }
	}
	a.asViewer(t, session, csrf, `{ viewer { identityStatus } }`, nil).decode(t, &status)
	require.Equal(t, "NOT_STARTED", status.Viewer.IdentityStatus)

	var out struct {
		StartIdentityVerification struct{ VerificationID, URL string }
	}
	a.asViewer(t, session, csrf, start, nil).decode(t, &out)
	require.Regexp(t, `^/dev/kyc/sbx_[a-z2-7]+$`, out.StartIdentityVerification.URL)
	a.asViewer(t, session, csrf, `{ viewer { identityStatus } }`, nil).decode(t, &status)
	require.Equal(t, "PENDING", status.Viewer.IdentityStatus)

	// Without a provider the service says so.
	b := newViewerAPI(t)
	_, session, csrf = b.signIn(t, "bob_kyc")
	require.Equal(t, "UNAVAILABLE", b.asViewer(t, session, csrf, start, nil).code(t))
}
