// Command helper does the parts of scripts/kube-env.sh that are easier in Go
// than in shell, so the script needs no openssl, curl or kubectl:
//
//	helper ports N                       print N free loopback TCP ports
//	helper init -dir D -server URL       write a CA, serving and client certs,
//	                                     service-account keys and kubeconfigs
//	helper bootstrap -kubeconfig K ...   wait for the apiserver, create fake
//	                                     nodes for kwok, wait until they are Ready
//	helper node-ready -kubeconfig K ...  wait until the real node is Ready
//	helper oci-image -binary B ...       write a one-binary OCI image archive
//	                                     (the real node's pause image)
//
// It lives in the kube build module so it reuses the client-go that the
// control plane is built with.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-env helper:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: helper ports|init|bootstrap ...")
	}
	switch args[0] {
	case "ports":
		return ports(args[1:])
	case "init":
		return initDir(args[1:])
	case "bootstrap":
		return bootstrap(ctx, args[1:])
	case "node-ready":
		return nodeReady(ctx, args[1:])
	case "oci-image":
		return ociImage(args[1:])
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// ports prints N distinct free loopback ports. They are free when probed; a
// race with another process is possible but unlikely, and start fails loudly.
func ports(args []string) error {
	n := 1
	if len(args) > 0 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil {
			return fmt.Errorf("parse count: %w", err)
		}
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		ls = append(ls, l)
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

// identity is one client of the apiserver that gets a cert and a kubeconfig.
type identity struct {
	file string // kubeconfig and cert base name
	cn   string
	orgs []string
}

var identities = []identity{
	{"admin", "fleetbench-admin", []string{"system:masters"}},
	{"controller-manager", "system:kube-controller-manager", nil},
	{"scheduler", "system:kube-scheduler", nil},
	// kwok plays every kubelet and writes node and pod status of all of them.
	{"kwok", "kwok", []string{"system:masters"}},
	// The real node's kubelet, as the Node authorizer expects it.
	{"kubelet", "system:node:" + RealNode, []string{"system:nodes"}},
	// The apiserver's client cert towards kubelets (logs, exec, port-forward).
	{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
}

// RealNode is the name the real node's kubelet registers under.
const RealNode = "fleetbench-node"

func initDir(args []string) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory")
	server := fs.String("server", "", "apiserver URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *server == "" {
		return errors.New("init needs -dir and -server")
	}
	pki := filepath.Join(*dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fleetbench-kube-env-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return fmt.Errorf("create ca: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCert(pki, "ca", caDER, caKey); err != nil {
		return err
	}

	serial := int64(2)
	issue := func(name string, tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		serial++
		tmpl.NotBefore = now.Add(-time.Hour)
		tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("create %s cert: %w", name, err)
		}
		return der, key, writeCert(pki, name, der, key)
	}

	if _, _, err := issue("apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}); err != nil {
		return err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for _, id := range identities {
		der, key, err := issue(id.file, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.cn, Organization: id.orgs},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["fleetbench"] = &clientcmdapi.Cluster{Server: *server, CertificateAuthorityData: caPEM}
		cfg.AuthInfos[id.cn] = &clientcmdapi.AuthInfo{
			ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		}
		cfg.Contexts["fleetbench"] = &clientcmdapi.Context{Cluster: "fleetbench", AuthInfo: id.cn}
		cfg.CurrentContext = "fleetbench"
		if err := clientcmd.WriteToFile(*cfg, filepath.Join(*dir, id.file+".kubeconfig")); err != nil {
			return fmt.Errorf("write %s kubeconfig: %w", id.file, err)
		}
	}

	// Service-account token signing key pair.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pki, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pki, "sa.key"),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}), 0o600)
}

func writeCert(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// bootstrap waits for /readyz, creates the fake nodes kwok manages, and waits
// until they are Ready and untainted and the default ServiceAccount exists,
// so that the first test can schedule a pod at once.
func bootstrap(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig")
	nodes := fs.Int("nodes", 3, "number of fake nodes")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	var last error
	poll := func(what string, f func() error) error {
		for {
			if last = f(); last == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait for %s: %w (last: %v)", what, ctx.Err(), last)
			case <-time.After(250 * time.Millisecond):
			}
		}
	}

	if err := poll("apiserver /readyz", func() error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	}); err != nil {
		return err
	}

	for i := range *nodes {
		n := fakeNode(fmt.Sprintf("kwok-node-%d", i))
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}

	if err := poll("nodes Ready", func() error {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range list.Items {
			if nodeSchedulable(&n) {
				ready++
			}
		}
		if ready < *nodes {
			return fmt.Errorf("%d of %d nodes ready and untainted", ready, *nodes)
		}
		return nil
	}); err != nil {
		return err
	}

	if err := poll("default ServiceAccount", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	// The kube-root-ca.crt ConfigMap every pod's ServiceAccount volume
	// projects: a pod created before it exists waits for it.
	return poll("kube-root-ca.crt", func() error {
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

func nodeReadyCondition(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeSchedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// fakeNode is a Node that kwok (run with
// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake) manages.
// Capacity is generous so scheduling never depends on the test's requests.
func fakeNode(name string) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"kubernetes.io/role":     "agent",
			},
		},
		Status: corev1.NodeStatus{
			Allocatable: res,
			Capacity:    res,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    "amd64",
				OperatingSystem: "linux",
				KubeletVersion:  "fake",
			},
		},
	}
}
