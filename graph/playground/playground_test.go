package playground

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(Config{Path: "/playground", Endpoint: "/graphql"}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	require.NoError(t, err)
	return resp, b.String()
}

// TestPageLoadsOnlyItsOwnFiles: the page names no other host, its scripts
// are files (the CSP allows no inline script) served from the binary with
// their types, and each link carries the file's hash.
func TestPageLoadsOnlyItsOwnFiles(t *testing.T) {
	srv := newServer(t)
	for _, path := range []string{"/playground", "/playground/"} {
		resp, page := get(t, srv.URL+path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self';")
		require.Contains(t, csp, "default-src 'none'")
		require.Contains(t, csp, "frame-ancestors 'none'")
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

		require.NotRegexp(t, `(?i)(https?:)?//[a-z0-9.-]+\.[a-z]`, page, "the page names no other host")
		require.NotContains(t, page, "<script>", "no inline script")
		srcs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
		require.Len(t, srcs, 7, "two stylesheets and five scripts")
		for _, m := range srcs {
			url := strings.ReplaceAll(m[1], "&amp;", "&")
			require.True(t, strings.HasPrefix(url, "/playground/assets/"), url)
			resp, body := get(t, srv.URL+url)
			require.Equal(t, http.StatusOK, resp.StatusCode, url)
			require.NotEmpty(t, body, url)
			want := "text/javascript; charset=utf-8"
			if strings.Contains(url, ".css?") {
				want = "text/css; charset=utf-8"
			}
			require.Equal(t, want, resp.Header.Get("Content-Type"), url)
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"), url)
			name, hash, _ := strings.Cut(strings.TrimPrefix(url, "/playground/assets/"), "?v=")
			sum := sha256.Sum256([]byte(body))
			require.Equal(t, hex.EncodeToString(sum[:8]), hash, name)
		}
	}
}

// TestPageConfig: the page's configuration names the endpoint, the key
// headers the API reads and the example tabs, each with the headers its
// operation needs.
func TestPageConfig(t *testing.T) {
	_, page := get(t, newServer(t).URL+"/playground")
	m := regexp.MustCompile(`(?s)<script type="application/json" id="playground-config">(.*?)</script>`).FindStringSubmatch(page)
	require.NotNil(t, m)
	var cfg pageConfig
	require.NoError(t, json.Unmarshal([]byte(m[1]), &cfg))
	require.Equal(t, "/graphql", cfg.Endpoint)
	require.JSONEq(t, `{"X-Agent-Key": "", "X-Checkout-Secret-Key": ""}`, cfg.DefaultHeaders)
	require.Len(t, cfg.Tabs, 5)
	wantHeaders := []string{`{}`, `{"X-Agent-Key": ""}`, `{"X-Checkout-Secret-Key": ""}`, `{}`, `{"X-Checkout-Secret-Key": ""}`}
	for i, tab := range cfg.Tabs {
		require.JSONEq(t, wantHeaders[i], tab.Headers, "tab %d", i)
		if tab.Variables != "" {
			require.True(t, json.Valid([]byte(tab.Variables)), tab.Variables)
		}
	}
	require.Contains(t, cfg.Tabs[0].Query, "quickRegister(")
	require.Contains(t, cfg.Tabs[2].Query, "createSession(")
	require.Contains(t, cfg.Tabs[3].Query, "subscription SessionStatus")
	require.Contains(t, cfg.Tabs[4].Query, "subscription MerchantEvents")

	// The keys panel names each header the API reads.
	for _, h := range []string{"X-Agent-Key", "X-Checkout-Secret-Key", "X-CSRF-Token"} {
		require.Contains(t, page, "<code>"+h+"</code>")
	}
}

// TestStyleNonce: each answer has its own CSP nonce for styles, the one the
// page hands GraphiQL for the <style> element its dialogs insert; inline
// styles without it stay refused.
func TestStyleNonce(t *testing.T) {
	srv := newServer(t)
	re := regexp.MustCompile(`"styleNonce":"([A-Za-z0-9_-]{22})"`)
	var nonces []string
	for range 2 {
		resp, page := get(t, srv.URL+"/playground")
		m := re.FindStringSubmatch(page)
		require.NotNil(t, m, page)
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "style-src 'self' 'nonce-"+m[1]+"';")
		require.NotContains(t, resp.Header.Get("Content-Security-Policy"), "unsafe")
		nonces = append(nonces, m[1])
	}
	require.NotEqual(t, nonces[0], nonces[1])
}

// TestAssetsAndOtherPaths: a file requested without its page's hash is
// checked again rather than kept; unknown paths and methods are refused.
func TestAssetsAndOtherPaths(t *testing.T) {
	srv := newServer(t)
	resp, body := get(t, srv.URL+"/playground/assets/playground.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	require.NotEmpty(t, resp.Header.Get("ETag"))
	require.Contains(t, body, "createFetcher")

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/playground/assets/playground.js", nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	resp2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp2.Body.Close()
	require.Equal(t, http.StatusNotModified, resp2.StatusCode)

	resp, body = get(t, srv.URL+"/playground/assets/vendor/LICENSES.txt")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, body, "==== graphiql@")

	for _, path := range []string{"/playground/assets/nope.js", "/playground/assets/", "/playground/other", "/playground/assets/../page.html"} {
		resp, _ := get(t, srv.URL+path)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	resp, err = http.Post(srv.URL+"/playground", "text/plain", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestVendorFilesMatchTheLockFile: the embedded GraphiQL and React files
// are the ones update.sh copied from the versions package-lock.json pins
// (MANIFEST: hash, file, package@version), so a lock change without
// `make playground`, or an edited copy, fails here.
func TestVendorFilesMatchTheLockFile(t *testing.T) {
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	b, err := os.ReadFile("package-lock.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &lock))
	var pkg struct{ Dependencies map[string]string }
	b, err = os.ReadFile("package.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &pkg))
	for name, version := range pkg.Dependencies {
		require.Regexp(t, `^\d+\.\d+\.\d+$`, version, "%s is pinned to an exact version", name)
		require.Equal(t, version, lock.Packages["node_modules/"+name].Version, "%s: package.json and the lock file agree", name)
	}

	manifest, err := assetsFS.ReadFile("assets/vendor/MANIFEST")
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(manifest)), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 3, line)
		sum, file, pkgVersion := f[0], f[1], f[2]
		name, version, ok := strings.Cut(strings.TrimPrefix(pkgVersion, "@"), "@")
		require.True(t, ok, line)
		if strings.HasPrefix(pkgVersion, "@") {
			name = "@" + name
		}
		require.Equal(t, lock.Packages["node_modules/"+name].Version, version, "%s comes from %s as locked", file, name)
		body, err := assetsFS.ReadFile("assets/vendor/" + file)
		require.NoError(t, err)
		got := sha256.Sum256(body)
		require.Equal(t, sum, hex.EncodeToString(got[:]), "%s is update.sh's copy", file)
		listed[file] = true
	}
	entries, err := assetsFS.ReadDir("assets/vendor")
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() != "MANIFEST" && e.Name() != "LICENSES.txt" {
			require.True(t, listed[e.Name()], "%s is in MANIFEST", e.Name())
		}
	}
	licences, err := assetsFS.ReadFile("assets/vendor/LICENSES.txt")
	require.NoError(t, err)
	for dir, p := range lock.Packages {
		if dir == "" {
			continue
		}
		name := dir[strings.LastIndex(dir, "node_modules/")+len("node_modules/"):]
		require.Contains(t, string(licences), "==== "+name+"@"+p.Version+" ", "%s's licence", dir)
	}
}
