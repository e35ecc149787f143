package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scaleShapes are the deployments BenchmarkScaleOut compares on the same
// cores: one API and one worker process, then two of each.
var scaleShapes = []struct{ serve, worker int }{{1, 1}, {2, 2}}

// scaleClients is how many clients create sessions at once: enough to keep
// every API process busy.
const scaleClients = 32

// BenchmarkScaleOut runs the production shape (separate `agentpay serve`
// and `agentpay worker` processes of the real binary on one PostgreSQL
// database, docs/operations.md) with one and with two processes of each,
// and reports what the deployment sustains, so the figures show whether
// the work spreads:
//
//   - creates: b.N session creates by scaleClients clients spread over the
//     API processes (creates/s);
//
//   - deliveries: b.N webhook.test events (20 per merchant, the hourly
//     bound) sent through the API processes and delivered by the workers
//     to a loopback receiver that answers at once (deliveries/s, from the
//     first send to the last delivery).
//
//     TEST_DATABASE_URL=postgres://... go test ./cmd/agentpay -run '^$' -bench ScaleOut -benchtime 2000x
func BenchmarkScaleOut(b *testing.B) {
	for _, shape := range scaleShapes {
		b.Run(fmt.Sprintf("serve=%d,worker=%d/creates", shape.serve, shape.worker), func(b *testing.B) {
			e, apis := startShape(b, shape.serve, shape.worker)
			merchants := make([]merchant, len(apis))
			for i, api := range apis {
				merchants[i] = e.RegisterMerchant(api)
			}
			client := scaleClient()
			b.ResetTimer()
			start := time.Now()
			err := runClients(b.N, func(c, n int) error {
				i := (c + n) % len(apis)
				return createSession(client, apis[i], merchants[i].TestSecretKey)
			})
			elapsed := time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
		})
		b.Run(fmt.Sprintf("serve=%d,worker=%d/deliveries", shape.serve, shape.worker), func(b *testing.B) {
			e, apis := startShape(b, shape.serve, shape.worker)
			const perMerchant = 20
			var merchants []merchant
			for i := 0; i*perMerchant < b.N; i++ {
				merchants = append(merchants, e.RegisterMerchant(apis[i%len(apis)]))
			}
			before := countTestWebhooks(e)
			client := scaleClient()
			b.ResetTimer()
			start := time.Now()
			err := runClients(b.N, func(c, n int) error {
				return sendTestWebhook(client, apis[(c+n)%len(apis)], merchants[n/perMerchant].TestSecretKey)
			})
			if err != nil {
				b.Fatal(err)
			}
			waitFor(b, 5*time.Minute, func() bool { return countTestWebhooks(e)-before >= b.N },
				"%d webhook.test deliveries", b.N)
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
		})
	}
}

// runClients runs do for n = 0 .. total-1 from scaleClients clients at
// once (c: the client), and answers the first error.
func runClients(total int, do func(c, n int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, scaleClients)
	for c := range scaleClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1) - 1)
				if n >= total {
					return
				}
				if err := do(c, n); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startShape starts a deployment of serve API and worker processes on a
// fresh database and waits until every worker has scanned once; it
// answers the APIs' base URLs.
func startShape(b *testing.B, serve, worker int) (*procEnv, []string) {
	b.Helper()
	e := newProcEnv(b)
	for i := range worker {
		e.Worker(fmt.Sprintf("worker-%d", i))
	}
	e.WaitFirstScan()
	var apis []string
	for i := range serve {
		_, api := e.Serve(fmt.Sprintf("serve-%d", i))
		apis = append(apis, api)
	}
	return e, apis
}

// scaleClient keeps a connection per client to each API, as a busy
// integration does.
func scaleClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = scaleClients
	return &http.Client{Transport: t, Timeout: time.Minute}
}

func createSession(c *http.Client, api, secretKey string) error {
	return post(c, api+"/checkout/sessions", secretKey, `{"amount":5,"currency":"USD"}`, http.StatusCreated)
}

func sendTestWebhook(c *http.Client, api, secretKey string) error {
	body, err := json.Marshal(map[string]string{"query": "mutation { sendTestWebhook { id } }"})
	if err != nil {
		return err
	}
	return post(c, api+"/graphql", secretKey, string(body), http.StatusOK)
}

func post(c *http.Client, url, secretKey, body string, status int) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Checkout-Secret-Key", secretKey)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != status || bytes.Contains(raw, []byte(`"errors"`)) {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	return nil
}

// countTestWebhooks counts the receiver's acknowledged webhook.test
// deliveries.
func countTestWebhooks(e *procEnv) int {
	n := 0
	for _, w := range e.Receiver.Requests() {
		if w.Acked && w.Event == "webhook.test" {
			n++
		}
	}
	return n
}
