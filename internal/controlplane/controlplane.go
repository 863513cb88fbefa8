// Package controlplane runs a real, local Kubernetes control plane for the
// Kubernetes phase where no cluster is at hand (CI, a laptop): etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager, built from
// Kubernetes' own source by scripts/k8s-build.sh, as processes on
// 127.0.0.1 with their own certificates, token and service-account keys.
// It writes a kubeconfig for everything else (package kube). It runs no
// node: the phase's node agent (package nodeagent) is one.
package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/wakebench/wakebench/internal/server"
)

// The components, by their program names in the binaries' directory.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	Scheduler         = "kube-scheduler"
	ControllerManager = "kube-controller-manager"
)

// Components is every component, in start order.
var Components = []string{Etcd, APIServer, Scheduler, ControllerManager}

// Options are a control plane's settings.
type Options struct {
	BinDir string // etcd, kube-apiserver, kube-scheduler, kube-controller-manager
	Dir    string // work directory: etcd data, certificates, kubeconfig
	LogDir string // one log per component ("": Dir)
	// FeatureGates are passed to the API server, scheduler and controller
	// manager alike (e.g. "DRAConsumableCapacity=true").
	FeatureGates []string
	// Without lists components not started (tests of what a missing
	// scheduler or controller manager looks like).
	Without []string
	// Ready bounds the wait for the API server's /readyz.
	Ready time.Duration
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Kubeconfig is the path of a kubeconfig for the admin user.
	Kubeconfig string
	// Host is the API server's URL.
	Host string
	// Started is how long the start took (spawn of etcd → API server ready).
	Started time.Duration
	logDir  string
	procs   []*server.Server // in start order
}

// Check says what is missing from bin, naming each absent program and how
// to build them.
func Check(bin string) error {
	var missing []string
	for _, c := range Components {
		if st, err := os.Stat(filepath.Join(bin, c)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kubernetes control plane binaries %s missing from %q: build them with scripts/k8s-build.sh (make k8s does) and set kubernetes.bin_dir or WAKEBENCH_K8S_BIN to the directory it prints",
			strings.Join(missing, ", "), bin)
	}
	return nil
}

// Start starts the control plane and waits for the API server to be ready.
// On error nothing is left running.
func Start(ctx context.Context, o Options) (cp *ControlPlane, err error) {
	if err := Check(o.BinDir); err != nil {
		return nil, err
	}
	if o.Ready == 0 {
		o.Ready = 60 * time.Second
	}
	for _, d := range []string{"etcd", "pki"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
	}
	var ports []int // etcd's client and peer ports, the API server's: three different ones
	for len(ports) < 3 {
		p, err := server.FreePort("127.0.0.1")
		if err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	pki := filepath.Join(o.Dir, "pki")
	certPEM, err := writePKI(pki)
	if err != nil {
		return nil, err
	}
	token, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(pki, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+`,wakebench-admin,wakebench-admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	kc := filepath.Join(o.Dir, "kubeconfig")
	if err := writeKubeconfig(kc, host, certPEM, token); err != nil {
		return nil, err
	}
	if o.LogDir == "" {
		o.LogDir = o.Dir
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	cp = &ControlPlane{Kubeconfig: kc, Host: host, logDir: o.LogDir}
	defer func() {
		if err != nil {
			err = errors.Join(err, cp.Stop())
		}
	}()
	gates := strings.Join(o.FeatureGates, ",")
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	args := map[string][]string{
		Etcd: {"--name=wakebench", "--data-dir=" + filepath.Join(o.Dir, "etcd"),
			"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=wakebench=" + peerURL, "--log-level=warn",
			// A throwaway cluster: fsync would only make CI's disk the bottleneck.
			"--unsafe-no-fsync"},
		APIServer: {"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
			"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
			"--token-auth-file=" + tokens, "--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + filepath.Join(pki, "sa.pub"),
			"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
			"--service-cluster-ip-range=10.96.0.0/16", "--feature-gates=" + gates},
		Scheduler: {"--kubeconfig=" + kc, "--secure-port=0", "--leader-elect=false", "--feature-gates=" + gates},
		ControllerManager: {"--kubeconfig=" + kc, "--secure-port=0", "--leader-elect=false", "--feature-gates=" + gates,
			"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"), "--use-service-account-credentials=false",
			// Nodes are the node agent's: no CIDRs to hand out, no cloud.
			"--allocate-node-cidrs=false", "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller"},
	}
	began := time.Now()
	for _, c := range Components {
		if slices.Contains(o.Without, c) {
			continue
		}
		srv, err := server.Start(server.Spec{Label: c, Path: filepath.Join(o.BinDir, c), Args: args[c], LogPath: cp.LogPath(c)})
		if err != nil {
			return cp, fmt.Errorf("control plane: %w", err)
		}
		cp.procs = append(cp.procs, srv)
		if c == APIServer {
			if err := waitReady(ctx, srv, host, token, certPEM, o.Ready); err != nil {
				return cp, fmt.Errorf("kube-apiserver not ready: %w; log: %s", err, cp.LogPath(c))
			}
		}
	}
	cp.Started = time.Since(began)
	return cp, nil
}

// LogPath is where component c logs.
func (cp *ControlPlane) LogPath(c string) string { return filepath.Join(cp.logDir, c+".log") }

// Alive says which started components have exited, with their log: a
// control plane that lost its scheduler says so by name.
func (cp *ControlPlane) Alive() error {
	var errs []error
	for _, p := range cp.procs {
		select {
		case <-p.Done():
			errs = append(errs, fmt.Errorf("%s exited: %v", p.Label(), p.ExitErr()))
		default:
		}
	}
	return errors.Join(errs...)
}

// Stop stops every component, last started first.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, p := range slices.Backward(cp.procs) {
		if err := p.Stop(10 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", p.Label(), err))
		}
	}
	cp.procs = nil
	return errors.Join(errs...)
}

// waitReady polls the API server's /readyz until it answers 200.
func waitReady(ctx context.Context, srv *server.Server, host, token string, ca []byte, d time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := hc.Do(req); err != nil {
			last = err
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("/readyz: HTTP %d", resp.StatusCode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w (last: %v)", d, context.Cause(ctx), last)
		case <-srv.Done():
			return fmt.Errorf("it exited: %v", srv.ExitErr())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("control plane: token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writePKI writes the API server's serving certificate (self-signed, for
// 127.0.0.1 and localhost) and the service-account signing keys; it
// returns the certificate, which the kubeconfig trusts.
func writePKI(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("control plane: serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "wakebench-kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("control plane: serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("control plane: service-account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	files := map[string][]byte{
		"apiserver.crt": certPEM,
		"apiserver.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"sa.key":        pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}),
		"sa.pub":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
	}
	return certPEM, nil
}

func writeKubeconfig(path, host string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["wakebench"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos["wakebench-admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["wakebench"] = &clientcmdapi.Context{Cluster: "wakebench", AuthInfo: "wakebench-admin"}
	cfg.CurrentContext = "wakebench"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	return nil
}
