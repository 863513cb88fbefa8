package nodeagent

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wakebench/wakebench/internal/testmain"
)

// serveEnv, set, makes the test binary a Pod's container: an HTTP server
// on the address it names, answering /health and showing its environment
// on /env.
const serveEnv = "NODEAGENT_TEST_SERVE"

// exitEnv, set, makes the test binary a Job's container: it writes the
// environment variables named in echoEnv (comma-separated) as NAME=value
// lines to the file outEnv names, then exits with the code exitEnv gives.
const (
	exitEnv = "NODEAGENT_TEST_EXIT"
	echoEnv = "NODEAGENT_TEST_ECHO"
	outEnv  = "NODEAGENT_TEST_OUT"
)

func TestMain(m *testing.M) {
	if code := os.Getenv(exitEnv); code != "" {
		var b strings.Builder
		for _, n := range strings.Split(os.Getenv(echoEnv), ",") {
			b.WriteString(n + "=" + os.Getenv(n) + "\n")
		}
		if err := os.WriteFile(os.Getenv(outEnv), []byte(b.String()), 0o644); err != nil {
			os.Exit(4)
		}
		c, _ := strconv.Atoi(code)
		os.Exit(c)
	}
	if addr := os.Getenv(serveEnv); addr != "" {
		http.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
		http.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(os.Getenv(r.URL.Query().Get("name")))) })
		if err := http.ListenAndServe(addr, nil); err != nil {
			os.Exit(3)
		}
		return
	}
	testmain.Main(m, "")
}
