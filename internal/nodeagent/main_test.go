package nodeagent

import (
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// serveEnv, set, makes the test binary a Pod's container: an HTTP server
// on the address it names, answering /health and showing its environment
// on /env.
const serveEnv = "NODEAGENT_TEST_SERVE"

func TestMain(m *testing.M) {
	if addr := os.Getenv(serveEnv); addr != "" {
		http.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
		http.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(os.Getenv(r.URL.Query().Get("name")))) })
		if err := http.ListenAndServe(addr, nil); err != nil {
			os.Exit(3)
		}
		return
	}
	goleak.VerifyTestMain(m)
}
