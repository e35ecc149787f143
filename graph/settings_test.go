package graph

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/internal/testenv"
)

// anotherSession signs a user in once more (a second browser), answering
// its session token and CSRF token.
func (a *viewerAPI) anotherSession(t *testing.T, u *ent.User, userAgent string) (string, string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, a.Svc.RequestSignIn(ctx, u.Email, "192.0.2.2"))
	m, err := a.DB.Ent.MailMessage.Query().Where(mailmessage.To(u.Email)).
		Order(ent.Desc(mailmessage.FieldCreatedAt), ent.Desc(mailmessage.FieldID)).First(ctx)
	require.NoError(t, err)
	link := agentpay.MailLinks(m.Text)[0]
	in, err := a.Svc.CompleteSignIn(ctx, link[strings.LastIndex(link, "/")+1:], nil, userAgent)
	require.NoError(t, err)
	v, err := a.Svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err)
	return in.SessionToken, v.CSRFToken()
}

func TestViewerSettingsOverGraphQL(t *testing.T) {
	api := newViewerAPI(t)
	ann, session, csrf := api.signIn(t, uniqueName(t, "ann"))
	_, bobSession, bobCSRF := api.signIn(t, uniqueName(t, "bob"))

	// Display name: the service's rule, and nothing without the CSRF token.
	rename := `mutation($n: String!) { updateViewer(displayName: $n) { displayName username } }`
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", rename, map[string]any{"n": "Eve"}).code(t))
	require.Equal(t, "BAD_USER_INPUT", api.asViewer(t, session, csrf, rename, map[string]any{"n": "Ann\nAdmin"}).code(t))
	var renamed struct {
		UpdateViewer struct{ DisplayName, Username string }
	}
	api.asViewer(t, session, csrf, rename, map[string]any{"n": "  Ann Lee "}).decode(t, &renamed)
	require.Equal(t, "Ann Lee", renamed.UpdateViewer.DisplayName)
	require.Equal(t, ann.Username, renamed.UpdateViewer.Username)

	// Passkeys: begin, the authenticator's answer, finish; listed; the
	// ceremony used once; deleting another's refused.
	begin := `mutation { beginPasskeyRegistration { ceremonyId options expiresAt } }`
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", begin, nil).code(t))
	var begun struct {
		BeginPasskeyRegistration struct {
			CeremonyID string
			Options    json.RawMessage
		}
	}
	api.asViewer(t, session, csrf, begin, nil).decode(t, &begun)
	require.Contains(t, string(begun.BeginPasskeyRegistration.Options), `"rp":{"id":"app.test","name":"agentpay"}`)
	a := testenv.NewAuthenticator(testenv.AppURL)
	answer := string(a.Register(t, begun.BeginPasskeyRegistration.Options, 0))
	finish := `mutation($c: ID!, $n: String!, $cred: String!) { finishPasskeyRegistration(ceremonyId: $c, name: $n, credential: $cred) { id name transports lastUsedAt } }`
	vars := map[string]any{"c": begun.BeginPasskeyRegistration.CeremonyID, "n": "Laptop", "cred": answer}
	require.Equal(t, "NOT_FOUND", api.asViewer(t, bobSession, bobCSRF, finish, vars).code(t), "another user's ceremony")
	var finished struct {
		FinishPasskeyRegistration struct {
			ID, Name   string
			Transports []string
			LastUsedAt *string
		}
	}
	api.asViewer(t, session, csrf, finish, vars).decode(t, &finished)
	require.Equal(t, "Laptop", finished.FinishPasskeyRegistration.Name)
	require.Equal(t, []string{"internal"}, finished.FinishPasskeyRegistration.Transports)
	require.Nil(t, finished.FinishPasskeyRegistration.LastUsedAt)
	require.Equal(t, "NOT_FOUND", api.asViewer(t, session, csrf, finish, vars).code(t), "a ceremony is used once")

	var listed struct {
		Viewer struct {
			Passkeys []struct{ ID, Name string }
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { passkeys { id name } } }`, nil).decode(t, &listed)
	require.Len(t, listed.Viewer.Passkeys, 1)
	require.Equal(t, finished.FinishPasskeyRegistration.ID, listed.Viewer.Passkeys[0].ID)
	api.asViewer(t, bobSession, bobCSRF, `{ viewer { passkeys { id name } } }`, nil).decode(t, &listed)
	require.Empty(t, listed.Viewer.Passkeys, "bob sees only his")

	// With a passkey, adding another or deleting one needs a step-up: an
	// assertion of a passkey the account has, begun for that action.
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, csrf, begin, nil).code(t), "adding a second needs the first")
	stepUp := func(action string, id any) map[string]any {
		t.Helper()
		var up struct {
			BeginStepUp struct {
				ID, Method string
				Options    json.RawMessage
			}
		}
		api.asViewer(t, session, csrf, `mutation($in: StepUpInput!) { beginStepUp(input: $in) { id method options } }`,
			map[string]any{"in": map[string]any{"action": action, "id": id}}).decode(t, &up)
		require.Equal(t, "PASSKEY", up.BeginStepUp.Method)
		return map[string]any{"c": up.BeginStepUp.ID, "cred": string(a.Assert(t, up.BeginStepUp.Options, a.Passkeys[0]))}
	}
	var again struct{ BeginPasskeyRegistration struct{ CeremonyID string } }
	api.asViewer(t, session, csrf, `mutation($c: ID, $cred: String) { beginPasskeyRegistration(ceremonyId: $c, credential: $cred) { ceremonyId } }`,
		stepUp("ADD_PASSKEY", nil)).decode(t, &again)
	require.NotEmpty(t, again.BeginPasskeyRegistration.CeremonyID)

	del := `mutation($id: ID!, $c: ID, $cred: String) { deletePasskey(id: $id, ceremonyId: $c, credential: $cred) }`
	idVars := map[string]any{"id": finished.FinishPasskeyRegistration.ID}
	require.Equal(t, "NOT_FOUND", api.asViewer(t, bobSession, bobCSRF, del, idVars).code(t))
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", del, idVars).code(t))
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, csrf, del, idVars).code(t), "no step-up")
	proof := stepUp("REMOVE_PASSKEY", finished.FinishPasskeyRegistration.ID)
	var deleted struct{ DeletePasskey bool }
	api.asViewer(t, session, csrf, del, map[string]any{"id": finished.FinishPasskeyRegistration.ID, "c": proof["c"], "cred": proof["cred"]}).decode(t, &deleted)
	require.True(t, deleted.DeletePasskey)
	require.Equal(t, "NOT_FOUND", api.asViewer(t, session, csrf, del, idVars).code(t))

	// Sessions: this one marked current; another user's not revocable;
	// revoking another browser signs it out, revoking this one signs out.
	other, otherCSRF := api.anotherSession(t, ann, "Other browser")
	var sessions struct {
		Viewer struct {
			Sessions []struct {
				ID, UserAgent, CreatedAt, ExpiresAt string
				Current                             bool
			}
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { sessions { id userAgent createdAt expiresAt current } } }`, nil).decode(t, &sessions)
	require.Len(t, sessions.Viewer.Sessions, 2)
	require.Equal(t, "Other browser", sessions.Viewer.Sessions[0].UserAgent, "newest first")
	require.False(t, sessions.Viewer.Sessions[0].Current)
	require.True(t, sessions.Viewer.Sessions[1].Current)
	otherID, currentID := sessions.Viewer.Sessions[0].ID, sessions.Viewer.Sessions[1].ID

	revoke := `mutation($id: ID!) { revokeSession(id: $id) }`
	require.Equal(t, "NOT_FOUND", api.asViewer(t, bobSession, bobCSRF, revoke, map[string]any{"id": otherID}).code(t))
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", revoke, map[string]any{"id": otherID}).code(t))
	var revoked struct{ RevokeSession bool }
	api.asViewer(t, session, csrf, revoke, map[string]any{"id": otherID}).decode(t, &revoked)
	require.True(t, revoked.RevokeSession)
	require.Equal(t, "UNAUTHENTICATED", api.asViewer(t, other, otherCSRF, `{ viewer { id } }`, nil).code(t))
	api.asViewer(t, session, csrf, revoke, map[string]any{"id": currentID}).decode(t, &revoked)
	require.Equal(t, "UNAUTHENTICATED", api.asViewer(t, session, csrf, `{ viewer { id } }`, nil).code(t))
	var bobStill struct{ Viewer struct{ ID string } }
	api.asViewer(t, bobSession, bobCSRF, `{ viewer { id } }`, nil).decode(t, &bobStill)
}
